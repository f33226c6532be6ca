"""A real library tuned: SciPy's LU (OpenBLAS getrf) against its own default call.

The kernel (``mlkaps_gpu.kernels.scipy_lu``) factors an m x n matrix either with the library's
call ``scipy.linalg.lu_factor(A)`` or with a blocked / recursive LU built from SciPy's
``dgetrf`` / ``dtrsm`` / ``dgemm`` wrappers, with the block size and the BLAS thread count
(threadpoolctl) as knobs. The expert is the library's default: ``lu_factor(A)`` on the
library's default threads (every core), i.e. ``method=library, nb=16 (ignored),
threads=<cores>``.

Stages, all through the public API: ``mlkaps_gpu.tune`` (``experiments/configs/scipy_lu.toml``
with ``--budget`` and ``threads`` = 1..cores), ``mlkaps_gpu.validate`` of the header against
the expert on the ``--grid`` validation grid (cell centres), ``mlkaps_gpu.merge`` (decided from
that validation, merged header validated again with fresh measurements, headroom of a local
search around the expert, as ``mlkaps-gpu merge`` does by default). Writes
``scipy_lu<tag>.md`` / ``.csv`` / ``.json`` into ``--out``. Run it alone on the machine::

    python experiments/scipy_lu_vs_default.py --budget 2000 --grid 10x10 --work runs/scipy_lu

(with nothing else measuring on the machine: wrap it in a lock such as ``flock`` if others do).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from benchkit import provenance

import mlkaps_gpu
from mlkaps_gpu.kernels import available_cores, scipy_lu_expert
from mlkaps_gpu.validation import (
    FixedConfiguration,
    HeadroomSettings,
    Validation,
    describe_merge,
    parse_grid,
    write_merge,
    write_validation,
)

CONFIG = Path(__file__).parent / "configs" / "scipy_lu.toml"
RESULTS = Path(__file__).parent / "results"
EXPERT_LABEL = "lu_factor(A), default threads"
THREADS_LINE = 'threads = { type = "int", values = [1, 2] }'


def config_text(budget: int, threads: list[int]) -> str:
    """The experiment's configuration with this budget and thread counts."""
    text = CONFIG.read_text(encoding="utf-8")
    if "budget = 600" not in text or THREADS_LINE not in text:
        raise SystemExit(f"{CONFIG}: expected 'budget = 600' and '{THREADS_LINE}' to substitute")
    text = text.replace("budget = 600", f"budget = {budget}")
    return text.replace(THREADS_LINE, f'threads = {{ type = "int", values = {threads} }}')


def machine() -> dict[str, Any]:
    """Cores, CPU model, BLAS library and versions of this machine."""
    from threadpoolctl import threadpool_info

    blas = [
        f"{i['internal_api']} {i['version']} ({i['architecture']}, {i['num_threads']} threads, "
        f"{Path(i['filepath']).name})"
        for i in threadpool_info()
        if i["user_api"] == "blas"
    ]
    import scipy

    return {
        "cores": available_cores(),
        "cpu": provenance.cpu_model(),
        "blas": blas,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
    }


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def progress_printer() -> Any:
    last: dict[str, float] = {}

    def progress(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - last.get(stage, 0.0) > 30:
            last[stage] = now
            print(f"  {stage}: {done}/{total}  load {load()}", flush=True)

    return progress


def short(row: pd.Series, side: str) -> str:
    """``L2`` (library, 2 threads), ``B64/1`` (blocked, nb 64, 1 thread), ``R32/2``..."""
    method = str(row[f"{side}_method"])
    if method == "library":
        return f"L{int(row[f'{side}_threads'])}"
    return f"{method[0].upper()}{int(row[f'{side}_nb'])}/{int(row[f'{side}_threads'])}"


def point_table(before: Validation, after: Validation, decisions: pd.DataFrame) -> pd.DataFrame:
    """One row per validation point: configurations, times, speedups and verdicts."""
    b, a = before.points, after.points
    table = b[["m", "n"]].copy()
    for label, frame, side in (
        ("tuned", b, "tuned"),
        ("merged", a, "tuned"),
        ("expert", b, "reference"),
    ):
        for name in ("method", "nb", "threads"):
            table[f"{label}_{name}"] = frame[f"{side}_{name}"].to_numpy()
    table["tuned_s"] = np.exp(b["tuned_cost"])
    table["expert_s"] = np.exp(b["reference_cost"])
    table["speedup_before"] = b["speedup"]
    table["noise_before"] = b["noise"]
    table["verdict_before"] = b["verdict"]
    table["merged_s"] = np.exp(a["tuned_cost"].to_numpy())
    table["expert_again_s"] = np.exp(a["reference_cost"].to_numpy())
    table["speedup_after"] = a["speedup"].to_numpy()
    table["noise_after"] = a["noise"].to_numpy()
    table["verdict_after"] = a["verdict"].to_numpy()
    table["kept"] = decisions["source"].to_numpy()
    return table


def choice_map(table: pd.DataFrame, side: str, verdict: str) -> list[str]:
    """A markdown table: m down, n across, the configuration and its verdict mark."""
    marks = {"progression": "+", "regression": "-", "neutral": "", "same": "", "failed": "?"}
    ms, ns = sorted(table["m"].unique()), sorted(table["n"].unique())
    lines = ["| m \\ n | " + " | ".join(str(n) for n in ns) + " |"]
    lines.append("|---" * (len(ns) + 1) + "|")
    for m in ms:
        cells = []
        for n in ns:
            row = table[(table["m"] == m) & (table["n"] == n)].iloc[0]
            cells.append(short(row, side) + marks.get(str(row[verdict]), ""))
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    worst = summary.get("worst") or {}
    return {
        "geomean": summary["geomean_speedup"],
        "progressions": summary["progressions"]["count"],
        "regressions": summary["regressions"]["count"],
        "compared": summary["compared"],
        "same": summary["same_configuration"],
        "worst": worst.get("speedup"),
        "worst_at": worst.get("inputs"),
        "worst_verdict": worst.get("verdict"),
        "noise": summary["noise_threshold"],
        "load_average": summary.get("load_average"),
        "seconds": summary.get("seconds"),
    }


SWEEP_POINTS = ((0, 0), (0.4, 0.4), (0.8, 0.8), (1, 1), (1, 0.15), (0.15, 1))


def method_sweep(campaign: Any, points: pd.DataFrame, rounds: int) -> pd.DataFrame:
    """Every valid configuration measured at a few validation points (``SWEEP_POINTS``:
    fractions along the sorted m and n values), ``rounds`` sweeps in alternating order. Per
    configuration two times: the median over the rounds of the executor's medians (what the
    tuner sees) and the fastest single timed call of all rounds (the configuration's speed
    when nothing else runs, robust to descheduling). Per point: the default, the library on
    each thread count and the best blocked and recursive configurations (by the fastest
    call). Not stored in the campaign."""
    space = campaign.space
    ms, ns = sorted(points["m"].unique()), sorted(points["n"].unique())
    chosen = sorted(
        {
            (int(ms[round(a * (len(ms) - 1))]), int(ns[round(b * (len(ns) - 1))]))
            for a, b in SWEEP_POINTS
        }
    )
    rows = []
    for m, n in chosen:
        codes = space.valid_design_codes({"m": m, "n": n})
        designs = space.design_from_codes(codes).assign(m=m, n=n)[space.names]
        times = np.full((len(designs), rounds), np.nan)
        fastest = np.full(len(designs), np.inf)
        for round_ in range(rounds):
            order = np.arange(len(designs))[:: 1 if round_ % 2 == 0 else -1]
            result = campaign.setup.executor.run(designs.iloc[order])
            ok = (result["status"] == "ok").to_numpy()
            times[order, round_] = np.where(ok, result["time"].to_numpy(dtype=float), np.nan)
            calls = [min(json.loads(raw), default=np.inf) for raw in result["raw_times"]]
            fastest[order] = np.minimum(fastest[order], np.where(ok, calls, np.inf))
        designs["median"] = np.nanmedian(times, axis=1)
        designs["time"] = fastest
        rows.append(sweep_row(designs, m, n))
    return pd.DataFrame(rows)


def sweep_row(designs: pd.DataFrame, m: int, n: int) -> dict[str, Any]:
    expert = scipy_lu_expert()
    library = designs[designs["method"] == "library"].set_index("threads")
    row: dict[str, Any] = {"m": m, "n": n}
    row["default_s"] = float(library["time"][expert["threads"]])
    for threads, entry in library.iterrows():
        row[f"library_{threads}_threads_s"] = float(entry["time"])
        row[f"library_{threads}_threads_median_s"] = float(entry["median"])
    for method in ("blocked", "recursive"):
        own = designs[designs["method"] == method]
        if len(own):
            best = own.loc[own["time"].idxmin()]
            row[f"best_{method}"] = f"nb {int(best['nb'])}, {int(best['threads'])} threads"
            row[f"best_{method}_s"] = float(best["time"])
            row[f"best_{method}_median_s"] = float(best["median"])
    for statistic, column in (("fastest", "time"), ("fastest_by_median", "median")):
        best = designs.loc[designs[column].idxmin()]
        row[statistic] = short(best.add_prefix("best_"), "best")
    return row


def run(args: argparse.Namespace) -> dict[str, Any]:
    cores = available_cores()
    expert_values = scipy_lu_expert()
    threads = sorted(set(range(1, cores + 1)) | {int(expert_values["threads"])})
    config = mlkaps_gpu.parse_config(
        config_text(args.budget, threads), path=CONFIG, label=CONFIG.name
    )
    directory = args.work / f"scipy_lu_b{args.budget}"
    loads: dict[str, list[float]] = {"start": load()}
    started = time.perf_counter()
    campaign = mlkaps_gpu.tune(config, out=directory, progress=progress_printer())
    seconds = {"tune (this call; 0 when resumed finished)": round(time.perf_counter() - started)}
    loads["after tune"] = load()
    print(f"tuned: {campaign.header_path}", flush=True)

    expert = FixedConfiguration(campaign.space, expert_values, label=EXPERT_LABEL)
    sizes = parse_grid(args.grid, campaign.sampling_space)
    started = time.perf_counter()
    before = mlkaps_gpu.validate(
        campaign, expert, sizes=sizes, repeats=args.repeats, seed=args.seed
    )
    write_validation(before, campaign.directory / "validation", campaign.space)
    seconds["validate"] = round(time.perf_counter() - started)
    loads["after validate"] = load()
    print(before.describe(), flush=True)

    started = time.perf_counter()
    result = mlkaps_gpu.merge(
        campaign,
        expert,
        before=before,
        seed=args.seed,
        headroom=HeadroomSettings(args.headroom_points, args.headroom_neighbours, seed=args.seed),
    )
    write_merge(result, campaign.directory / "merge", campaign.space)
    seconds["merge (fit, validate again, headroom)"] = round(time.perf_counter() - started)
    loads["after merge"] = load()
    started = time.perf_counter()
    sweep = method_sweep(campaign, before.points, args.sweep_rounds) if args.sweep_rounds else None
    seconds["method sweep"] = round(time.perf_counter() - started)
    loads["end"] = load()
    campaign.setup.executor.close()
    print(describe_merge(result.summary), flush=True)

    details = campaign.meta.get("details", {})
    return {
        "command": "python experiments/scipy_lu_vs_default.py " + shown_arguments(sys.argv[1:]),
        "commit": provenance.commit(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": machine(),
        "load_average": loads,
        "budget": args.budget,
        "grid": sizes,
        "repeats": args.repeats,
        "expert": {"label": EXPERT_LABEL, **expert_values},
        "threads": threads,
        "sampling": details.get("sampling", {}),
        "tree": {k: v for k, v in details.get("trees", {}).items() if k != "depth_sweep"},
        "seconds": seconds,
        "shipped": result.summary["shipped"],
        "merge": {
            k: result.summary.get(k)
            for k in ("kept_tuned", "kept_expert", "tree_agreement", "attempts", "header")
        },
        "before": headline(result.summary["before"]),
        "after": headline(result.summary["after"]),
        "headroom": result.summary.get("headroom"),
        "table": point_table(result.before, result.after, result.decisions),
        "sweep": sweep,
    }


def shown_arguments(arguments: list[str]) -> str:
    """The arguments with the --work / --out folders written as WORK / OUT."""
    shown, hide = [], None
    for argument in arguments:
        if hide is not None:
            argument = hide
        hide = {"--work": "WORK", "--out": "OUT"}.get(argument)
        shown.append(argument)
    return " ".join(shown)


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def markdown(record: dict[str, Any]) -> str:
    table: pd.DataFrame = record["table"]
    m = record["machine"]
    shipped_expert = record["shipped"] == "expert"
    lines = [
        "# A real library tuned: SciPy's LU (OpenBLAS getrf) against its own default call",
        "",
        f"Command: `{record['command']}`",
        "",
        f"Commit {record['commit']}, {record['date']}; machine: {m['cores']} cores, {m['cpu']}; "
        f"BLAS: {'; '.join(m['blas'])}; Python {m['python']}, NumPy {m['numpy']}, "
        f"SciPy {m['scipy']}.",
        "",
        "Load average (1, 5, 15 min) at "
        + "; ".join(f"{k}: {v}" for k, v in record["load_average"].items())
        + f"; during the validation runs (start, end, 1 min): before merge "
        f"{record['before']['load_average']}, after merge {record['after']['load_average']}.",
        "",
        f"Kernel: `scipy_lu(m, n, method, nb, threads)`, m, n in [32, 1024] (log); method "
        f"library / blocked / recursive, nb 16..512, threads {record['threads']}. Expert: "
        f"`{record['expert']['label']}` = method library, threads {record['expert']['threads']}."
        f" Budget {record['budget']}, validation grid {record['grid']} (cell centres), "
        f"{record['repeats']} paired rounds per point (python executor: 1 warm-up + 5 timed "
        "calls, median, per measurement).",
        "",
        "## Result",
        "",
        "| | geomean speedup over lu_factor(A) | progressions | regressions beyond noise | "
        "worst (differing configs) | median noise threshold |",
        "|---|---|---|---|---|---|",
    ]
    for label, key in (("header (before merge)", "before"), ("merged header", "after")):
        h = record[key]
        worst = (
            f"{_x(h['worst'])} ({h['worst_verdict']})"
            if h["worst"] is not None
            else "- (every point the same)"
        )
        lines.append(
            f"| {label} | {h['geomean']:.3f}x | {h['progressions']} / {h['compared']} | "
            f"{h['regressions']} / {h['compared']} | {worst} | +-{100 * h['noise']:.1f}% |"
        )
    if shipped_expert:
        lines += [
            "",
            "**Merge: the expert ships.** No merged header beat the library's default without a "
            "regression beyond noise (the row 'merged header' is the rejected header's "
            "validation); what ships is `lu_factor(A)` itself, speedup 1.000x by definition.",
        ]
    else:
        lines += [
            "",
            f"**Merge: the merged header ships** (`{record['merge']['header']}`), kept the tuned "
            f"configuration at {record['merge']['kept_tuned']} points and the library's default "
            f"at {record['merge']['kept_expert']}.",
        ]
    lines += ["", f"Merge attempts: {json.dumps(record['merge']['attempts'])}", ""]
    headroom = record["headroom"] or {}
    if headroom.get("geomean_headroom") is not None:
        share = headroom.get("median_share_reached")
        lines += [
            f"Headroom ({headroom['method']}): the best of the expert's neighbourhood is "
            f"{headroom['geomean_headroom']:.3f}x faster than the expert (geomean over "
            f"{len(headroom['points'])} points, {headroom['points_with_headroom']} beyond noise);"
            " the shipped choice reaches "
            + (f"a median {100 * share:.0f}% of it." if share is not None else "- of it."),
            "",
            "| m | n | candidates | headroom | shipped speedup | noise | share |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in headroom["points"]:
            share_text = "-" if row["share"] is None else f"{100 * row['share']:.0f}%"
            lines.append(
                f"| {row['m']} | {row['n']} | {row['candidates']} | {row['headroom']:.3f}x | "
                f"{row['shipped_speedup']:.3f}x | +-{100 * row['noise']:.0f}% | {share_text} |"
            )
        lines.append("")
    lines += where_default_stays(table, shipped_expert)
    lines += sweep_lines(record["sweep"])
    seconds = record["seconds"]
    sampling = record["sampling"]
    lines += [
        "## Wall times",
        "",
        "| stage | seconds |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in seconds.items()),
        f"| sampling (campaign record) | {sampling.get('wall_seconds', '-')} |",
        f"| validate before merge (record) | {record['before']['seconds']} |",
        f"| validate after merge (record) | {record['after']['seconds']} |",
        "",
        f"Tree of the campaign: {record['tree']}.",
        "",
        "Per point: `scipy_lu.csv` (tuned / merged / expert configurations, median times, "
        "speedups, noise thresholds and verdicts).",
    ]
    return "\n".join(lines) + "\n"


def where_default_stays(table: pd.DataFrame, shipped_expert: bool) -> list[str]:
    """Where the library's default call stays best, and the choice maps."""
    same = (table["verdict_before"] == "same").sum()
    neutral = (table["verdict_before"] == "neutral").sum()
    lost = (table["verdict_before"] == "regression").sum()
    won = table[table["verdict_before"] == "progression"]
    configs = won.apply(lambda row: short(row, "tuned"), axis=1).value_counts()
    lines = [
        "## Where the library's default stays best",
        "",
        f"Of {len(table)} validation points, the header picked the default itself at {same}, a "
        f"configuration not significantly different at {neutral}, and one significantly slower "
        f"at {lost}; at those {same + neutral + lost} points the merge keeps (or would keep) "
        f"`lu_factor(A)`. The tuned choice won at {len(won)} points"
        + (": " + ", ".join(f"{k} at {v}" for k, v in configs.items()) if len(won) else "")
        + ".",
        "",
        "Codes: `L<k>` = the library call on k threads (on every core: the default), "
        "`B64/1` = blocked nb 64 on one thread, `R32/2` = recursive with leaves of 32 columns "
        "on 2 threads; `+` progression, `-` regression beyond noise.",
        "",
        "The header's choices (before merge):",
        "",
        *choice_map(table, "tuned", "verdict_before"),
        "",
        "What ships" + (" (the expert everywhere):" if shipped_expert else " (merged header):"),
        "",
    ]
    if shipped_expert:
        shipped = table.assign(
            merged_method=table["expert_method"],
            merged_nb=table["expert_nb"],
            merged_threads=table["expert_threads"],
            verdict_shipped="same",
        )
        lines += choice_map(shipped, "merged", "verdict_shipped")
    else:
        lines += choice_map(table, "merged", "verdict_after")
    return [*lines, ""]


def sweep_lines(sweep: pd.DataFrame | None) -> list[str]:
    """The method sweep as a markdown table (milliseconds)."""
    if sweep is None or not len(sweep):
        return []
    threads = sorted(
        int(c.split("_")[1])
        for c in sweep.columns
        if c.startswith("library_") and c.endswith("_threads_s")
    )
    lines = [
        "## Every method at a few points (measured sweep)",
        "",
        "Every valid configuration measured at these validation points in rounds of one "
        "executor call each (1 warm-up + 5 timed calls); each cell gives, in milliseconds, the "
        "fastest single call of all rounds / the median over the rounds of the call medians "
        "(what the tuner and the validation see). Best blocked / recursive: the block size and "
        "threads of the fastest call. Not stored in the campaign.",
        "",
        "| m | n | "
        + " | ".join(f"library, {t} thread{'s' if t > 1 else ''}" for t in threads)
        + " | best blocked | best recursive | fastest (by fastest call / by median) |",
        "|---|---|" + "---|" * (len(threads) + 3),
    ]
    for row in sweep.to_dict("records"):
        cells = [
            f"{1e3 * row[f'library_{t}_threads_s']:.3f} / "
            f"{1e3 * row[f'library_{t}_threads_median_s']:.3f}"
            for t in threads
        ]
        for method in ("blocked", "recursive"):
            if isinstance(row.get(f"best_{method}"), str):
                cells.append(
                    f"{1e3 * row[f'best_{method}_s']:.3f} / "
                    f"{1e3 * row[f'best_{method}_median_s']:.3f} ({row[f'best_{method}']})"
                )
            else:
                cells.append("- (no valid nb)")
        best = f"{row['fastest']} / {row['fastest_by_median']}"
        lines.append(f"| {row['m']} | {row['n']} | " + " | ".join(cells) + f" | {best} |")
    return [*lines, ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--grid", default="10x10", help="validation grid (cell centres)")
    parser.add_argument("--repeats", type=int, default=5, help="paired rounds per point")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--sweep-rounds", type=int, default=3, help="rounds of the method sweep (0: none)"
    )
    parser.add_argument("--headroom-points", type=int, default=8)
    parser.add_argument("--headroom-neighbours", type=int, default=6)
    parser.add_argument("--work", type=Path, default=Path("runs/scipy_lu"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--tag", default="", help="suffix of the result file names")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    record = run(args)
    stem = args.out / f"scipy_lu{args.tag}"
    provenance.write_csv(record["table"], f"{stem}.csv", index=False)
    text = markdown(record)
    Path(f"{stem}.md").write_text(text)
    serialisable = {k: v for k, v in record.items() if k not in ("table", "sweep")}
    if record["sweep"] is not None:
        serialisable["sweep"] = record["sweep"].to_dict("records")
    Path(f"{stem}.json").write_text(json.dumps(serialisable, indent=2, default=str) + "\n")
    print(text)
    print(f"written {stem}.md / .csv / .json", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
