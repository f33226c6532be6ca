"""Input-aware pipeline against direct per-GPU tuning at equal numbers of kernel evaluations.

On the replayed convolution with the GPU as input, for each total budget B (default 150, 300,
600 evaluations over the five complete GPUs):

- **pipeline**: one campaign of ``configs/convolution_replay.toml`` with the ``ga_adaptive``
  sampler and budget B (sampling, LightGBM, optimization, trees, compiled header), scored as
  ``replay_convolution.py`` does: fraction of optimum of the configuration the header selects
  for each GPU (0 if it failed there);
- **best per-input strategy**: the constraint-aware strategy with the best performance score in
  ``results/strategies_scores.csv`` (or ``--strategy``), run on each GPU with B / 5 evaluations;
  fraction of optimum of the best configuration it measured;
- **Optuna TPE**: ``optuna.samplers.TPESampler`` run on each GPU with B / 5 evaluations over the
  design codes (ints, categoricals as categoricals); a configuration violating the constraints
  is not measured but costs an evaluation and is reported to TPE as infeasible
  (``constraints_func``); a configuration TPE suggests again is answered from memory for free.
  The row ``TPE (free invalid)`` uses Kernel Tuner's convention instead (violations cost
  nothing). Optuna is imported only here (``pip install optuna``).

    MLKAPS_GPU_DATA=../shared/data/replay python experiments/pipeline_vs_direct.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from benchkit.cases import CONFIGS  # noqa: E402
from benchkit.provenance import header, provenance, write_csv  # noqa: E402

from mlkaps_gpu.campaign import parse_config, prepare  # noqa: E402
from mlkaps_gpu.search import STRATEGIES, TabulatedObjective  # noqa: E402
from mlkaps_gpu.space import Space  # noqa: E402

HERE = Path(__file__).parent
CONFIG = CONFIGS["convolution"]
RESULTS = HERE / "results"
GPUS = ("A100", "A4000", "MI250X", "W6600", "W7800")
PENALTY = 1e9  # what TPE is told for a failed or infeasible configuration (ms)


def best_strategy(path: Path) -> str:
    """The constraint-aware strategy with the highest mean score of the strategies study."""
    if not path.is_file():
        print(f"{path} not found: using genetic_algorithm", file=sys.stderr)
        return "genetic_algorithm"
    scores = pd.read_csv(path, index_col="strategy", comment="#")["mean"]
    aware = [name for name in scores.index if name in STRATEGIES and "unaware" not in name]
    return str(scores.loc[aware].idxmax())


def direct_fraction(
    objective: TabulatedObjective, space: Space, gpu: str, name: str, budget: int, seed: int
) -> float:
    rng = np.random.default_rng([seed, GPUS.index(gpu), 7])
    result = STRATEGIES[name]().run(objective, space, {"gpu": gpu}, budget, rng)
    optimum = float(np.nanmin(objective.values))
    return optimum / result.best_value if np.isfinite(result.best_value) else 0.0


def tpe_fraction(
    objective: TabulatedObjective,
    space: Space,
    gpu: str,
    budget: int,
    seed: int,
    *,
    count_invalid: bool = True,
) -> float:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(
        seed=seed, constraints_func=lambda trial: trial.user_attrs["violation"]
    )
    study = optuna.create_study(direction="minimize", sampler=sampler)
    memory: dict[tuple[int, ...], tuple[float, float]] = {}
    evaluations, best = 0, np.inf
    for _ in range(100 * budget):
        if evaluations >= budget:
            break
        trial = study.ask()
        key = tuple(_suggest(trial, parameter) for parameter in space.design)
        if key not in memory:
            # the tabulated objective marks constraint violations 'invalid' (never measured)
            value, status = objective.evaluate_codes(np.asarray([key]))
            if status[0] == "invalid":
                memory[key] = (PENALTY, 1.0)
                evaluations += 1 if count_invalid else 0
            else:
                ok = status[0] == "ok" and np.isfinite(value[0])
                memory[key] = (float(value[0]) if ok else PENALTY, 0.0)
                best = min(best, float(value[0])) if ok else best
                evaluations += 1
        value, violation = memory[key]
        trial.set_user_attr("violation", [violation])
        study.tell(trial, value)
    optimum = float(np.nanmin(objective.values))
    return optimum / best if np.isfinite(best) else 0.0


def _suggest(trial: Any, parameter: Any) -> int:
    """The code of one design parameter (a categorical stays unordered for TPE)."""
    if parameter.n_values == 1:
        return 0
    if parameter.kind == "categorical":
        return int(trial.suggest_categorical(parameter.name, list(range(parameter.n_values))))
    return int(trial.suggest_int(parameter.name, 0, parameter.n_values - 1))


def pipeline_fractions(totals: list[int], seeds: int) -> pd.DataFrame:
    """Fraction of optimum per GPU of the pipeline's header (``replay_convolution.run_one``)."""
    from replay_convolution import run_one  # the same campaign and scoring (a sibling script)

    text = CONFIG.read_text()
    frames = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for total in totals:
            for seed in range(seeds):
                table = run_one(text, total, seed, "ga_adaptive", Path(folder))
                frames.append(table.assign(total=total))
                print(
                    f"pipeline B={total} seed {seed}: {table['fraction'].mean():.3f} "
                    f"({time.perf_counter() - started:.0f} s)",
                    file=sys.stderr,
                )
    return pd.concat(frames, ignore_index=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--totals", type=int, nargs="+", default=[150, 300, 600])
    parser.add_argument("--seeds", type=int, default=10, help="seeds of the direct methods")
    parser.add_argument("--pipeline-seeds", type=int, default=3)
    parser.add_argument("--strategy", default=None, help="per-input strategy (default: best)")
    parser.add_argument("--quick", action="store_true", help="total 150, 1 / 3 seeds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if not os.environ.get("MLKAPS_GPU_DATA"):
        print("MLKAPS_GPU_DATA is not set: point it at the replay data folder", file=sys.stderr)
        return 2
    try:
        import optuna  # noqa: F401
    except ImportError:
        print("this experiment needs optuna: pip install optuna", file=sys.stderr)
        return 2
    if args.quick:
        args.totals, args.seeds, args.pipeline_seeds = [150], 3, 1
    name = args.strategy or best_strategy(args.out / "strategies_scores.csv")
    started = time.perf_counter()
    config = parse_config(CONFIG.read_text(), path=CONFIG, label=CONFIG.name)
    setup = prepare(config)
    space = setup.space
    objectives = {
        gpu: TabulatedObjective.from_replay(setup.executor, space, {"gpu": gpu})  # type: ignore[arg-type]
        for gpu in GPUS
    }
    records = []
    for total in args.totals:
        per_gpu = total // len(GPUS)
        for gpu in GPUS:
            for seed in range(args.seeds):
                objective = objectives[gpu]
                for method, fraction in (
                    (name, direct_fraction(objective, space, gpu, name, per_gpu, seed)),
                    ("TPE", tpe_fraction(objective, space, gpu, per_gpu, seed)),
                    (
                        "TPE (free invalid)",
                        tpe_fraction(objective, space, gpu, per_gpu, seed, count_invalid=False),
                    ),
                ):
                    records.append(
                        {
                            "method": method,
                            "total": total,
                            "gpu": gpu,
                            "seed": seed,
                            "fraction": fraction,
                        }
                    )
        print(f"direct B={total} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    pipeline = pipeline_fractions(args.totals, args.pipeline_seeds)
    pipeline = pipeline.assign(method="pipeline (ga_adaptive)")[
        ["method", "total", "gpu", "seed", "fraction"]
    ]
    table = pd.concat([pd.DataFrame(records), pipeline], ignore_index=True)
    elapsed = time.perf_counter() - started

    summary = table.groupby(["method", "total"])["fraction"].agg(["mean", "std", "min"])
    order = ["pipeline (ga_adaptive)", name, "TPE", "TPE (free invalid)"]
    lines = [
        f"# pipeline_vs_direct.py{' --quick' if args.quick else ''}",
        "",
        "Fraction of optimum (mean ± std over GPUs and seeds, min in parentheses) at equal total "
        f"kernel evaluations over the five GPUs; direct methods get total / 5 per GPU, "
        f"{args.seeds} seeds; the pipeline {args.pipeline_seeds} seed(s). "
        f"Total time {elapsed:.0f} s.",
        "",
        "| method | " + " | ".join(f"B={t} ({t // len(GPUS)}/GPU)" for t in args.totals) + " |",
        "|---|" + "---|" * len(args.totals),
    ]
    for method in order:
        cells = []
        for total in args.totals:
            row = summary.loc[(method, total)]
            cells.append(f"{row['mean']:.3f} ± {row['std']:.3f} ({row['min']:.3f})")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    per_gpu = table.groupby(["method", "gpu", "total"])["fraction"].mean().unstack("total")
    lines += [
        "",
        "Per GPU (mean fraction of optimum):",
        "",
        "| method | GPU | " + " | ".join(f"B={t}" for t in args.totals) + " |",
        "|---|---|" + "---|" * len(args.totals),
    ]
    for method in order:
        for gpu in GPUS:
            values = per_gpu.loc[(method, gpu)]
            lines.append(
                f"| {method} | {gpu} | "
                + " | ".join(f"{values[t]:.3f}" for t in args.totals)
                + " |"
            )
    report = header(provenance(), markdown=True) + "\n".join(lines) + "\n"
    suffix = "_quick" if args.quick else ""
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"pipeline_vs_direct{suffix}.md").write_text(report, encoding="utf-8")
    write_csv(table, args.out / f"pipeline_vs_direct{suffix}.csv", index=False)
    print(report)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
