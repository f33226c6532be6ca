"""Every per-input strategy, constraint-aware and unaware, on the replayed convolution.

For each of the five complete GPUs (A100, A4000, MI250X, W6600, W7800), each strategy and each
seed, one run at the largest budget; since no strategy's behaviour depends on its budget, the
run's first k evaluations are the run of budget k, so one run gives the whole curve. Scored with
the methodology of Willemsen et al. (``mlkaps_gpu.analysis.methodology``): the best value found
after k evaluations, standardised between the expected best of random search without
replacement (0) and the optimum (1), averaged over every budget of the range and the GPUs.

Failed and invalid evaluations count against the budget (our convention). The unaware
evolutionary strategies are also run under Kernel Tuner's convention, where a constraint
violation is not measured and costs nothing (rows ``... (free invalid)``).

    MLKAPS_GPU_DATA=../shared/data/replay python experiments/strategies_study.py [--quick]

Writes ``experiments/results/strategies.md`` (tables), ``strategies_scores.csv`` (the scores),
``strategies_runs.csv`` (best value per run and budget) and ``strategies_fraction.png``
(fraction-of-optimum curves).
"""

from __future__ import annotations

import os

# small matrices everywhere: BLAS threads only fight over the shared cores
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from benchkit.cases import CONFIGS  # noqa: E402
from benchkit.provenance import header, provenance, write_csv  # noqa: E402

from mlkaps_gpu.analysis import SpaceReference, budget_range, curves  # noqa: E402
from mlkaps_gpu.campaign import parse_config, prepare  # noqa: E402
from mlkaps_gpu.search import STRATEGIES, TabulatedObjective  # noqa: E402

CONFIG = CONFIGS["convolution"]
RESULTS = Path(__file__).parent / "results"
GPUS = ("A100", "A4000", "MI250X", "W6600", "W7800")
UNAWARE = ("genetic_algorithm", "differential_evolution", "particle_swarm", "firefly")
REPORT_BUDGETS = (25, 50, 100, 200, 400)
FREE = " (free invalid)"


def load_spaces() -> tuple[object, dict[str, TabulatedObjective], dict[str, SpaceReference]]:
    config = parse_config(CONFIG.read_text(), path=CONFIG, label=CONFIG.name)
    setup = prepare(config)
    space = setup.space
    objectives, references = {}, {}
    for gpu in GPUS:
        objective = TabulatedObjective.from_replay(setup.executor, space, {"gpu": gpu})  # type: ignore[arg-type]
        # random search draws from every constraint-valid configuration, failed ones included
        values, _ = objective.evaluate_codes(space.valid_design_codes({"gpu": gpu}))
        objectives[gpu] = objective
        references[gpu] = SpaceReference(gpu, values)
    return space, objectives, references


def variants(names: list[str]) -> list[tuple[str, str, bool]]:
    """(row label, registry name, count_invalid) of every run variant."""
    out = [(name, name, True) for name in names]
    out += [(name + FREE, name, False) for name in names if name.endswith("_unaware")]
    return out


def run_all(
    space: object,
    objectives: dict[str, TabulatedObjective],
    rows: list[tuple[str, str, bool]],
    seeds: int,
    budget: int,
) -> dict[tuple[str, str], list[np.ndarray]]:
    traces: dict[tuple[str, str], list[np.ndarray]] = {}
    started = time.perf_counter()
    for position, (label, name, count_invalid) in enumerate(rows):
        clock = time.perf_counter()
        for gpu_index, gpu in enumerate(GPUS):
            for seed in range(seeds):
                rng = np.random.default_rng([seed, gpu_index, _stable_hash(name)])
                result = STRATEGIES[name]().run(
                    objectives[gpu],
                    space,  # type: ignore[arg-type]
                    {"gpu": gpu},
                    budget,
                    rng,
                    count_invalid=count_invalid,
                )
                traces.setdefault((label, gpu), []).append(result.values)
        print(
            f"[{position + 1}/{len(rows)}] {label}: {time.perf_counter() - clock:.1f} s "
            f"(total {time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
        )
    return traces


def _stable_hash(text: str) -> int:
    """A seed component from a name that does not change between Python runs."""
    return int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little") % (2**32)


def summarise(
    traces: dict[tuple[str, str], list[np.ndarray]],
    references: dict[str, SpaceReference],
    labels: list[str],
    budgets: np.ndarray,
) -> tuple[pd.DataFrame, dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]]:
    scores = pd.DataFrame(index=labels, columns=[*GPUS, "mean"], dtype=float)
    fractions: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {g: {} for g in GPUS}
    for label in labels:
        for gpu in GPUS:
            result = curves(traces[(label, gpu)], references[gpu], budgets)
            scores.loc[label, gpu] = result.score
            fractions[gpu][label] = (budgets, result.fraction)
        scores.loc[label, "mean"] = scores.loc[label, list(GPUS)].mean()
    return scores, fractions


def markdown(frame: pd.DataFrame, digits: int = 3, *, signed: bool = True) -> str:
    """A markdown table; numbers signed except in columns named 'fraction ...'."""
    header = "| " + " | ".join([frame.index.name or "", *map(str, frame.columns)]) + " |"
    lines = [header, "|" + "---|" * (len(frame.columns) + 1)]
    for index, row in frame.iterrows():
        cells = []
        for column, value in row.items():
            plus = "+" if signed and not str(column).startswith("fraction") else ""
            cells.append(
                format(value, f"{plus}.{digits}f") if isinstance(value, float) else str(value)
            )
        lines.append(f"| {index} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget-min", type=int, default=25)
    parser.add_argument("--budget-max", type=int, default=400)
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    parser.add_argument("--quick", action="store_true", help="2 seeds, budgets 25..100")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if not os.environ.get("MLKAPS_GPU_DATA"):
        print("MLKAPS_GPU_DATA is not set: point it at the replay data folder", file=sys.stderr)
        return 2
    unknown = [name for name in args.strategies if name not in STRATEGIES]
    if unknown:
        print(f"unknown strategies {unknown}; known: {list(STRATEGIES)}", file=sys.stderr)
        return 2
    if args.quick:
        args.seeds, args.budget_max = 2, 100
    suffix = "_quick" if args.quick else ""
    started = time.perf_counter()
    space, objectives, references = load_spaces()
    rows = variants(args.strategies)
    labels = [label for label, _, _ in rows]
    traces = run_all(space, objectives, rows, args.seeds, args.budget_max)
    budgets = budget_range(args.budget_min, args.budget_max)
    scores, fractions = summarise(traces, references, labels, budgets)
    elapsed = time.perf_counter() - started

    args.out.mkdir(parents=True, exist_ok=True)
    report = [
        f"# strategies_study.py{' --quick' if args.quick else ''}",
        "",
        f"Replayed convolution, GPUs {', '.join(GPUS)}; {args.seeds} seeds per strategy and GPU; "
        f"one run of budget {args.budget_max} per seed (a run's prefix of k evaluations is its "
        f"run of budget k). Failed and invalid evaluations count against the budget unless the "
        f"row says 'free invalid' (Kernel Tuner's convention). Total time {elapsed:.0f} s.",
        "",
        f"## Performance score (budgets {args.budget_min}..{args.budget_max}; random search "
        "without replacement = 0, optimum = 1)",
        "",
        markdown(scores.sort_values("mean", ascending=False).rename_axis("strategy")),
        "",
        "## Constraint awareness: aware form against unaware form",
        "",
        markdown(awareness(scores, fractions).rename_axis("algorithm")),
        "",
        f"(score: mean over the GPUs; fraction: mean fraction of optimum at budget "
        f"{args.budget_max}. The five spaces share one constraint set, 4362 of 10240 "
        "configurations valid, so sparsity does not vary between them.)",
        "",
        "## Mean fraction of optimum over the GPUs, per budget",
        "",
        markdown(fraction_table(fractions, labels, budgets).rename_axis("strategy"), signed=False),
        "",
    ]
    text = header(provenance(), markdown=True) + "\n".join(report)
    (args.out / f"strategies{suffix}.md").write_text(text, encoding="utf-8")
    write_csv(
        runs_table(traces, references), args.out / f"strategies_runs{suffix}.csv", index=False
    )
    write_csv(scores.rename_axis("strategy"), args.out / f"strategies_scores{suffix}.csv")
    plot(
        fractions,
        labels,
        args.out / f"strategies_fraction{suffix}.png",
        args.out / f"strategies_awareness{suffix}.png",
    )
    print("\n".join(report))
    return 0


def awareness(
    scores: pd.DataFrame, fractions: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]
) -> pd.DataFrame:
    """Per evolutionary algorithm: mean score of the aware and unaware forms, the difference
    (in score points: 0.39 is the paper's +39 %), and the mean fraction of optimum at the last
    budget."""
    rows = {}
    for name in UNAWARE:
        for label, other in (
            (name, name + "_unaware"),
            (f"{name} (free invalid)", name + "_unaware" + FREE),
        ):
            if name not in scores.index or other not in scores.index:
                continue
            aware_score, unaware_score = scores.loc[name, "mean"], scores.loc[other, "mean"]
            rows[label] = {
                "score aware": aware_score,
                "score unaware": unaware_score,
                "difference": aware_score - unaware_score,
                "fraction aware": _last_fraction(fractions, name),
                "fraction unaware": _last_fraction(fractions, other),
            }
    table = pd.DataFrame(rows).T
    for kind, selected in (
        ("mean", [k for k in table.index if "free" not in k]),
        ("mean (free invalid)", [k for k in table.index if "free" in k]),
    ):
        if selected:
            table.loc[kind] = table.loc[selected].mean()
    return table


def _last_fraction(
    fractions: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]], label: str
) -> float:
    return float(np.mean([fractions[gpu][label][1][-1] for gpu in GPUS]))


def fraction_table(
    fractions: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]],
    labels: list[str],
    budgets: np.ndarray,
) -> pd.DataFrame:
    shown = [b for b in REPORT_BUDGETS if budgets[0] <= b <= budgets[-1]]
    table = pd.DataFrame(index=labels, columns=[f"b={b}" for b in shown], dtype=float)
    for label in labels:
        mean = np.mean([fractions[gpu][label][1] for gpu in GPUS], axis=0)
        for b in shown:
            table.loc[label, f"b={b}"] = mean[b - budgets[0]]
    return table.sort_values(table.columns[-1], ascending=False)


def runs_table(
    traces: dict[tuple[str, str], list[np.ndarray]], references: dict[str, SpaceReference]
) -> pd.DataFrame:
    from mlkaps_gpu.analysis import best_at_budgets

    records = []
    for (label, gpu), runs in traces.items():
        for seed, trace in enumerate(runs):
            best = best_at_budgets(trace, REPORT_BUDGETS, references[gpu].failure_value)
            for budget, value in zip(REPORT_BUDGETS, best, strict=True):
                records.append(
                    {"strategy": label, "gpu": gpu, "seed": seed, "budget": budget, "best": value}
                )
    return pd.DataFrame(records)


def plot(
    fractions: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]],
    labels: list[str],
    path: Path,
    awareness_path: Path,
) -> None:
    """Fraction-of-optimum curves: every constraint-aware strategy per GPU (``path``), and each
    evolutionary algorithm in its three forms, averaged over the GPUs (``awareness_path``)."""
    import matplotlib

    from mlkaps_gpu.analysis.plots import plot_curves

    def mean(label: str) -> tuple[np.ndarray, np.ndarray]:
        budgets = fractions[GPUS[0]][label][0]
        return budgets, np.mean([fractions[gpu][label][1] for gpu in GPUS], axis=0)

    aware = [label for label in labels if "unaware" not in label]
    palette = matplotlib.colormaps["tab20"]
    styles: dict[str, dict[str, object]] = {
        label: {"color": palette(index % 20), "linestyle": "-" if index < 10 else "--"}
        for index, label in enumerate(aware)
    }
    panels = {gpu: {label: fractions[gpu][label] for label in aware} for gpu in GPUS}
    panels["mean over GPUs"] = {label: mean(label) for label in aware}
    ticks = [b for b in REPORT_BUDGETS if b <= fractions[GPUS[0]][aware[0]][0][-1]]
    common = {"xlabel": "evaluations", "ylabel": "fraction of optimum", "logx": True}
    plot_curves(panels, path, styles=styles, xticks=ticks, **common)  # type: ignore[arg-type]

    forms = {"aware": "", "unaware": "_unaware", "unaware, free invalid": "_unaware" + FREE}
    colours = {"aware": "tab:blue", "unaware": "tab:red", "unaware, free invalid": "tab:orange"}
    panels = {}
    for name in UNAWARE:
        lines = {
            form: mean(name + suffix) for form, suffix in forms.items() if name + suffix in labels
        }
        if "random_search" in labels:
            lines["random search"] = mean("random_search")
        if lines:
            panels[name] = lines
    form_styles: dict[str, dict[str, object]] = {k: {"color": v} for k, v in colours.items()}
    form_styles["random search"] = {"color": "black", "linestyle": ":"}
    if panels:
        plot_curves(
            panels,
            awareness_path,
            styles=form_styles,
            columns=2,
            xticks=ticks,
            **common,  # type: ignore[arg-type]
        )


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
