"""Sampler study: random, LHS, HVS, HVSr, Bayesian and GA-Adaptive at three budgets.

Two cases:

- ``replay``: the GPU convolution replayed from exhaustive Kernel Tuner caches, the GPU as a
  categorical input (``configs/convolution_replay.toml``; data at ``$MLKAPS_GPU_DATA``);
- ``lu``: the shipped C ``lu`` kernel measured on this machine (cffi; inputs m, n).

For every sampler, budget and seed the sampler is driven as the campaign drives it (batches of
``batch_size``, ask -> measure -> tell); a LightGBM surrogate (the campaign's settings) is fitted
on the successful measurements and scored:

- **global accuracy**: MAE and MAPE on held-out random valid rows (rows also measured by the
  sampler are left out);
- **local accuracy**: MAPE of the surrogate at the configurations the exhaustive optimizer picks
  (replay: per GPU; lu: at 12 fixed input points), and how many picks failed;
- **tuning quality**: replay: fraction of the optimum of the surrogate's pick and of the
  pipeline's pick (the campaign's ``prefer_measured`` rule); lu: speedup of the pick over the
  expert default (LAPACK's nb = 64, recursive panel, all threads), geometric mean over points.

Samplers that do not depend on the budget (all but GA-Adaptive, whose bootstrap and exploitation
schedule follow the budget) run once to the largest budget; smaller budgets are evaluated on the
prefix of their measurements, which is exactly what a run with the smaller budget draws (same
seed, same batches). Real-kernel measurements are cached per configuration, so a configuration
picked by several samplers is timed once and compared on the same number.

    MLKAPS_GPU_DATA=../shared/data/replay python experiments/sampler_study.py --quick
    MLKAPS_GPU_DATA=../shared/data/replay python experiments/sampler_study.py --case replay
    python experiments/sampler_study.py --case lu --seeds 3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from benchkit.cases import CONFIGS
from benchkit.provenance import header, provenance, write_csv
from scipy.stats import qmc
from threadpoolctl import threadpool_limits

from mlkaps_gpu.campaign import parse_config, prepare
from mlkaps_gpu.executors import Executor
from mlkaps_gpu.optimize import GridOptimizer
from mlkaps_gpu.sampling import SAMPLERS, GAAdaptiveSampler, Sampler
from mlkaps_gpu.space import Space
from mlkaps_gpu.surrogate import LightGBMSurrogate, accuracy

HERE = Path(__file__).parent
RESULTS = HERE / "results"
REPLAY_CONFIG = CONFIGS["convolution"]
#: Samplers of the study: name -> (registry name, GA-Adaptive sub-sampler or None).
SAMPLER_VARIANTS: dict[str, tuple[str, str | None]] = {
    "random": ("random", None),
    "lhs": ("lhs", None),
    "hvs": ("hvs", None),
    "hvsr": ("hvsr", None),
    "bayes": ("bayes", None),
    "ga_adaptive": ("ga_adaptive", "lhs"),  # the default sub-sampler (see the study)
    "ga_adaptive_hvsr": ("ga_adaptive", "hvsr"),
}
BUDGET_DEPENDENT = {"ga_adaptive"}
#: Rounds of paired (pick, expert) timings per real-kernel evaluation.
PAIRED_ROUNDS = 3


# --------------------------------------------------------------------------------- cases
@dataclass
class Case:
    """A tuning problem: its space, a way to measure, test rows and tuning points."""

    name: str
    space: Space
    measure: Callable[[pd.DataFrame], pd.DataFrame]
    test: pd.DataFrame  # held-out rows with their measured objective
    points: pd.DataFrame  # input points the optimizer picks a configuration for
    budgets: list[int]
    batch_size: int
    objective: str = "time"
    reference: dict[str, Any] = field(default_factory=dict)

    def surrogate(self, seed: int) -> LightGBMSurrogate:
        return LightGBMSurrogate(
            categorical_features=self.space.categorical_features, log_target=True, seed=seed
        )


def replay_case(budgets: list[int], test_size: int) -> Case:
    config = parse_config(REPLAY_CONFIG.read_text(), path=REPLAY_CONFIG, label=REPLAY_CONFIG.name)
    setup = prepare(config)
    executor = setup.executor
    space = setup.space
    every = executor.valid_configurations()  # type: ignore[attr-defined]
    rng = np.random.default_rng(12345)
    test = every.iloc[np.sort(rng.choice(len(every), test_size, replace=False))]
    test = space.assemble(test[space.input_names], space.design_codes(test)).assign(
        time=test["time"].to_numpy()
    )
    gpus = list(space.parameters["gpu"].domain_values())
    optimum = {gpu: executor.optimum(gpu)[0] for gpu in gpus}  # type: ignore[attr-defined]
    return Case(
        "replay",
        space,
        executor.run,
        test,
        pd.DataFrame({"gpu": pd.Series(gpus, dtype=object)}),
        budgets,
        config.sampling.batch_size,
        reference={"optimum": optimum},
    )


class CachedExecutor:
    """Measures each configuration once; later requests reuse the first measurement."""

    def __init__(self, executor: Executor, space: Space) -> None:
        self.executor = executor
        self.space = space
        self.cache: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.measured = 0
        self.seconds = 0.0

    def __call__(self, rows: pd.DataFrame) -> pd.DataFrame:
        keys = self.space.key(rows)
        new = [i for i, key in enumerate(keys) if key not in self.cache]
        if new:
            begin = time.perf_counter()
            results = self.executor.run(rows.iloc[new].reset_index(drop=True))
            self.seconds += time.perf_counter() - begin
            self.measured += len(new)
            for index, record in zip(new, results.to_dict("records"), strict=True):
                self.cache[keys[index]] = record
        return pd.DataFrame([self.cache[key] for key in keys])


def lu_case(budgets: list[int], test_size: int, n_points: int) -> Case:
    from mlkaps_gpu.kernels import load_builtin

    kernel = load_builtin("lu")
    space = Space(kernel.inputs, kernel.design, kernel.constraints)
    measure = CachedExecutor(kernel.make_executor(), space)
    rng = np.random.default_rng(12345)
    test = space.sample_valid(test_size, rng)
    results = measure(test)
    test = test[(results["status"] == "ok").to_numpy()].assign(
        time=results.loc[results["status"] == "ok", "time"].to_numpy()
    )
    unit = qmc.LatinHypercube(d=len(space.inputs), rng=rng).random(n_points)
    points = pd.DataFrame(
        {p.name: p.from_unit(unit[:, i], discrete=False) for i, p in enumerate(space.inputs)}
    )
    experts = pd.DataFrame([kernel.expert_for(row) for row in points.to_dict("records")])
    expert_rows = pd.concat([points, experts], axis=1)[space.names]
    expert_rows = space.assemble(points, space.design_codes(expert_rows))
    return Case(
        "lu",
        space,
        measure,
        test.reset_index(drop=True),
        points,
        budgets,
        20,
        reference={"expert": expert_rows, "executor": measure},
    )


# ----------------------------------------------------------------------------- sampling
def make_sampler(case: Case, variant: str, seed: int, budget: int) -> Sampler:
    name, sub_sampler = SAMPLER_VARIANTS[variant]
    if name == "ga_adaptive":
        return GAAdaptiveSampler(
            case.space,
            seed=seed,
            budget=budget,
            objective=case.objective,
            sub_sampler=sub_sampler or "lhs",
            surrogate_factory=lambda: case.surrogate(seed),
        )
    if name in ("hvs", "hvsr", "bayes"):
        return SAMPLERS[name](case.space, seed=seed, objective=case.objective)  # type: ignore[call-arg]
    return SAMPLERS[name](case.space, seed=seed)


def drive(case: Case, sampler: Sampler, budget: int) -> pd.DataFrame:
    """ask -> measure -> tell until ``budget`` rows; the history (rows and results)."""
    done = 0
    while done < budget:
        rows = sampler.ask(min(case.batch_size, budget - done))
        if len(rows) == 0:
            break
        sampler.tell(rows, case.measure(rows))
        done += len(rows)
    return sampler.history_


# ---------------------------------------------------------------------------- scoring
def prefer_measured(
    optima: pd.DataFrame, samples: pd.DataFrame, space: Space, objective: str, support: int = 5
) -> pd.DataFrame:
    """The campaign's ``prefer_measured`` rule (``Campaign._prefer_measured``): where the
    measurements at a point's exact inputs say better, ship the best measured configuration."""
    valid = samples[samples["status"] == "ok"]
    names, inputs = space.names, space.input_names
    out = optima.copy()
    for index, row in optima.iterrows():
        here = valid
        for name in inputs:
            here = here[here[name] == row[name]]
        if here.empty:
            continue
        best = here.loc[here[objective].idxmin()]
        same = here
        for name in space.design_names:
            same = same[same[name] == row[name]]
        predicted = row[f"predicted_{objective}"]
        if len(same):
            replace = best[objective] < same[objective].iloc[0]
        else:
            replace = best[objective] <= predicted or len(here) >= support
        if replace:
            for name in names:
                out.at[index, name] = best[name]
    return space.assemble(out[inputs], space.design_codes(out))


def paired_timing(case: Case, picks: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fresh timings of the picks and of the expert configuration of their points.

    The machine is shared: each pick is timed right next to its point's expert configuration
    (pairs in random order, each pair in random order), in ``PAIRED_ROUNDS`` rounds; a pick's
    time is the median of its rounds and so is the expert's, and the speedup is the median of
    the per-round ratios (see ``evaluate``)."""
    expert = case.reference["expert"]
    executor = case.reference["executor"].executor
    rng = np.random.default_rng(seed)
    n = len(picks)
    both = pd.concat([picks, expert], ignore_index=True)
    times = np.full((PAIRED_ROUNDS, 2 * n), np.nan)
    status = np.empty((PAIRED_ROUNDS, 2 * n), dtype=object)
    for round_ in range(PAIRED_ROUNDS):
        order = []
        for point in rng.permutation(n):
            pair = [point, n + point]
            order += pair if rng.random() < 0.5 else pair[::-1]
        timed = executor.run(both.iloc[order].reset_index(drop=True))
        times[round_, order] = timed["time"].to_numpy(dtype=np.float64)
        status[round_, order] = timed["status"].to_numpy()
    ok = (status == "ok").all(axis=0)
    median = np.where(ok, np.nanmedian(times, axis=0), np.nan)
    ratio = np.nanmedian(times[:, n:] / times[:, :n], axis=0)
    picked = pd.DataFrame({"time": median[:n], "status": np.where(ok[:n], "ok", "failed")})
    expert_times = pd.DataFrame(
        {"time": median[n:], "status": np.where(ok[n:], "ok", "failed"), "ratio": ratio}
    )
    return picked, expert_times


def evaluate(case: Case, samples: pd.DataFrame, seed: int) -> dict[str, float]:
    space, objective = case.space, case.objective
    ok = samples[(samples["status"] == "ok") & np.isfinite(samples[objective])]
    model = case.surrogate(seed).fit(space.features(ok), ok[objective].to_numpy())
    measured = set(space.key(samples))
    held_out = np.array([key not in measured for key in space.key(case.test)])
    test = case.test[held_out]
    scores = accuracy(model.predict(space.features(test)), test[objective].to_numpy())
    out: dict[str, float] = {"global_mae": scores["mae"], "global_mape": scores["mape"]}
    optimizer = GridOptimizer(space, objectives=[objective], method="exhaustive", seed=seed)
    optima = optimizer.run([model], case.points)
    picks = optima[space.names]
    if case.name == "replay":
        truth = case.measure(picks)
    else:
        truth, expert_truth = paired_timing(case, picks, seed)
    good = (truth["status"] == "ok").to_numpy()
    true_time = truth[objective].to_numpy(dtype=np.float64)
    predicted = optima[f"predicted_{objective}"].to_numpy()
    local = accuracy(predicted[good], true_time[good])
    out["local_mape"] = local["mape"]
    out["local_failed"] = float((~good).sum())
    if case.name == "replay":
        best = np.array([case.reference["optimum"][g] for g in case.points["gpu"]])
        out["fraction"] = float(np.mean(np.where(good, best / true_time, 0.0)))
        shipped = prefer_measured(optima, samples, space, objective)
        shipped_truth = case.measure(shipped)
        shipped_ok = (shipped_truth["status"] == "ok").to_numpy()
        shipped_time = shipped_truth[objective].to_numpy(dtype=np.float64)
        out["fraction_pipeline"] = float(np.mean(np.where(shipped_ok, best / shipped_time, 0.0)))
    else:
        ratio = np.where(good, expert_truth["ratio"].to_numpy(), np.nan)
        # load indicator (the expert's geometric-mean time) and the picks' thread counts: a
        # busy machine slows the expert's all-cores runs and favours single-thread picks
        out["expert_time_geo"] = float(np.exp(np.nanmean(np.log(expert_truth[objective]))))
        if "threads" in picks:
            out["threads1_share"] = float((picks["threads"] == 1).mean())
        out["speedup"] = float(np.exp(np.nanmean(np.log(ratio)))) if good.any() else np.nan
        out["speedup_min"] = float(np.nanmin(ratio)) if good.any() else np.nan
    return out


def run_variant(case: Case, variant: str, seed: int) -> list[dict[str, Any]]:
    rows = []
    if SAMPLER_VARIANTS[variant][0] in BUDGET_DEPENDENT:
        runs = [(budget, [budget]) for budget in case.budgets]
    else:
        runs = [(max(case.budgets), sorted(case.budgets))]
    for run_budget, evaluated in runs:
        started = time.perf_counter()
        history = drive(case, make_sampler(case, variant, seed, run_budget), run_budget)
        sampling_seconds = time.perf_counter() - started
        for budget in evaluated:
            begin = time.perf_counter()
            scores = evaluate(case, history.iloc[:budget], seed)
            rows.append(
                {
                    "case": case.name,
                    "sampler": variant,
                    "budget": budget,
                    "seed": seed,
                    "measured": min(budget, len(history)),
                    "sampling_s": round(sampling_seconds, 2),
                    "evaluation_s": round(time.perf_counter() - begin, 2),
                    **scores,
                }
            )
    return rows


# ----------------------------------------------------------------------------- reports
METRICS = {
    "replay": [
        ("global_mae", "global MAE (ms)", "{:.2f}"),
        ("global_mape", "global MAPE %", "{:.1f}"),
        ("local_mape", "local MAPE %", "{:.1f}"),
        ("fraction", "fraction of optimum (surrogate pick)", "{:.3f}"),
        ("fraction_pipeline", "fraction of optimum (pipeline)", "{:.3f}"),
    ],
    "lu": [
        ("global_mae", "global MAE (s)", "{:.4f}"),
        ("global_mape", "global MAPE %", "{:.1f}"),
        ("local_mape", "local MAPE %", "{:.1f}"),
        ("speedup", "speedup over expert (geo. mean)", "{:.3f}"),
    ],
}


def markdown(table: pd.DataFrame, case: str, seeds: int) -> str:
    lines = [f"## {case}: mean ± std over {seeds} seeds\n"]
    budgets = sorted(table["budget"].unique())
    for metric, title, fmt in METRICS[case]:
        lines.append(f"\n### {title}\n")
        lines.append("| sampler | " + " | ".join(f"budget {b}" for b in budgets) + " |")
        lines.append("|---|" + "---|" * len(budgets))
        for sampler in SAMPLER_VARIANTS:
            part = table[table["sampler"] == sampler]
            if part.empty:
                continue
            cells = []
            for budget in budgets:
                values = part.loc[part["budget"] == budget, metric].dropna()
                cells.append(
                    f"{fmt.format(values.mean())} ± {fmt.format(values.std(ddof=0))}"
                    if len(values)
                    else "-"
                )
            lines.append(f"| {sampler} | " + " | ".join(cells) + " |")
    failed = table.groupby("sampler")["local_failed"].sum()
    lines.append(
        "\nfailed picks (all budgets and seeds): "
        + ", ".join(f"{k} {int(v)}" for k, v in failed.items())
    )
    cost = table.groupby("sampler")["sampling_s"].mean()
    lines.append(
        "\nmean sampling seconds per run: " + ", ".join(f"{k} {v:.1f}" for k, v in cost.items())
    )
    return "\n".join(lines) + "\n"


def plot(table: pd.DataFrame, case: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = METRICS[case]
    figure, axes = plt.subplots(1, len(metrics), figsize=(4.0 * len(metrics) + 1.5, 3.6))
    for axis, (metric, title, _) in zip(axes, metrics, strict=True):
        for sampler in SAMPLER_VARIANTS:
            part = table[table["sampler"] == sampler]
            if part.empty:
                continue
            grouped = part.groupby("budget")[metric]
            mean, std = grouped.mean(), grouped.std(ddof=0)
            axis.errorbar(mean.index, mean, yerr=std, marker="o", capsize=3, label=sampler)
        axis.set_title(title, fontsize=10)
        axis.set_xlabel("budget (evaluations)")
        axis.set_xticks(sorted(table["budget"].unique()))
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="center right", fontsize=8)
    figure.suptitle(f"sampler study: {case} (mean ± std over seeds)")
    figure.tight_layout(rect=(0.0, 0.0, 0.9, 1.0))
    figure.savefig(path, dpi=120)
    plt.close(figure)


# -------------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", choices=["replay", "lu", "all"], default="all")
    parser.add_argument("--quick", action="store_true", help="2 seeds, small budgets")
    parser.add_argument("--seeds", type=int, default=None, help="seeds (default 5; quick 2, 1)")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds start here")
    parser.add_argument("--tag", default="", help="suffix of the result files")
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLER_VARIANTS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite tables and plots from the CSVs"
    )
    args = parser.parse_args()
    unknown = set(args.samplers) - set(SAMPLER_VARIANTS)
    if unknown:
        parser.error(f"unknown samplers {sorted(unknown)} (known: {list(SAMPLER_VARIANTS)})")
    cases = ["replay", "lu"] if args.case == "all" else [args.case]
    suffix = ("_quick" if args.quick else "") + (f"_{args.tag}" if args.tag else "")
    if args.report_only:
        for name in cases:
            stem = args.out / f"sampler_study_{name}{suffix}"
            table = pd.read_csv(stem.with_suffix(".csv"), comment="#")
            text = stem.with_suffix(".md").read_text() if stem.with_suffix(".md").exists() else ""
            tail = text[text.index("\ntotal time") :] if "\ntotal time" in text else ""
            stem.with_suffix(".md").write_text(
                markdown(table, name, table["seed"].nunique()) + tail.rstrip() + "\n"
            )
            plot(table, name, stem.with_suffix(".png"))
        return 0
    if "replay" in cases and not os.environ.get("MLKAPS_GPU_DATA"):
        print("MLKAPS_GPU_DATA is not set: point it at the replay data folder", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name in cases:
        started = time.perf_counter()
        if name == "replay":
            budgets = [100, 200] if args.quick else [150, 300, 600]
            case = replay_case(budgets, 500 if args.quick else 2000)
            seeds = args.seeds or (2 if args.quick else 5)
        else:
            budgets = [40, 80] if args.quick else [60, 120, 240]
            case = lu_case(budgets, 40 if args.quick else 150, 6 if args.quick else 12)
            seeds = args.seeds or (1 if args.quick else 5)
        print(f"{name}: set-up {time.perf_counter() - started:.0f} s", file=sys.stderr)
        rows = []
        for seed in range(args.first_seed, args.first_seed + seeds):
            for variant in args.samplers:
                begin = time.perf_counter()
                rows += run_variant(case, variant, seed)
                print(
                    f"{name} seed {seed} {variant}: {time.perf_counter() - begin:.1f} s",
                    file=sys.stderr,
                )
        table = pd.DataFrame(rows)
        stem = args.out / f"sampler_study_{name}{suffix}"
        write_csv(table, stem.with_suffix(".csv"), index=False)
        total = time.perf_counter() - started
        text = markdown(table, name, seeds) + f"\ntotal time {total:.0f} s"
        if name == "lu":
            executor = case.reference["executor"]
            text += (
                f" ({executor.measured} kernel measurements, {executor.seconds:.0f} s measuring)"
            )
        stem.with_suffix(".md").write_text(header(provenance(), markdown=True) + text + "\n")
        plot(table, name, stem.with_suffix(".png"))
        print(text)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    with threadpool_limits(limits=1):
        sys.exit(main())
