"""Method settings judged out of sample on the measured cases: the project's campaign on a
table replay of one pass of a truth, its header scored on the other passes.

    python experiments/pass_replays.py --case lu gemm demo --seeds 0-2
    python experiments/pass_replays.py --case gemm --set trees.max_configs=3 --label "K = 3"

Each truth of ``bench_inputs.py`` (``experiments/results/bench_inputs_truth_CASE.csv``) holds
two passes or more over every valid cell. For each pass k and seed, a campaign with the
project's defaults (and the ``--set`` assignments) tunes on a table replay of pass k (its
noise, its input points as the grid: no kernel runs, a campaign takes seconds), and its
compiled header's answer at every point is scored on the minimum over the other passes
(decision 0034: no tool is scored on the values it chose by). It is the cheap, paired
testbed the variants of decisions 0034 and 0035 were judged on: same tables, same seeds,
one setting changed; judge a variant by the mean over the runs beside the defaults' in the
same results, and by the live campaigns of ``bench_inputs.py`` before keeping it.

Beside each header, the LightGBM argmin fitted on the same campaign's stored samples (as in
``bench_inputs.py``: 5 model seeds, their geomeans averaged) says what a plain model makes of
the same measurements (issue 39, Done when 1 (b): the header never more than 0.02 below it).

With ``--peers``, ``bench_inputs.py``'s budgeted peers (random cells + LightGBM, autotune +
nearest, Helion-style, best single configuration from B cells) draw the campaign's budget of
cells from the same table pass, seeded by the run's seed, and are scored on the same passes:
the header against each, paired by run, out of sample.

With ``--tables FILE...`` (one case), the campaigns replay those tables instead of the truth's
passes: tables of the same cells (the case's inputs and design columns, and ``time``) measured
at another time than the truth, such as the live passes ``bench_inputs.py`` keeps in its work
directory (``live<seed>_table.csv``). Each is scored on the minimum over every pass of the
truth, since none of them is the table: the drift between sessions, which replays of one
truth pass scored on its sibling passes do not see, is in every run.

With ``--emulate``, the campaigns do not replay the tables (``--tables``, or each pass of the
truth, scored on the other passes): they tune the case's own configuration (its inputs'
whole range, its grid) on a kernel emulated from each table
(``benchkit/emulated_kernel.py``: the table's times interpolated between its points, times a
measurement's noise drawn afresh at each measurement from how the truth's passes differ),
sampling and measuring again as a live campaign does, in seconds; with ``--peers`` the peers
draw from each table with one such noise per cell, as the ``(measured live)`` peers do. The
table already holds one pass's noise, so this doubles it at the table's points: a
pessimistic bound; ``--emulate none`` adds none (a cell measured again reads the same
value), the optimistic one. ``--drift SD,RHO`` adds slow moments of the machine that last
over successive measurements (an AR(1) series in the log time, its positive part; see the
kernel's docstring); the peers, which measure their cells as one pass in shuffled order,
meet it as one independent draw of its marginal per cell.

Prints a table (per case and label: mean ± sd of the runs' geomeans, the lowest run, the
worst point, the points below 0.67, and the header's difference to the model on its own
samples: mean, lowest, runs more than 0.02 below, and runs with a point below 0.67 where that
model, the median over its seeds, has none, and of those the runs where such a point is below
0.67 on the replayed table too) and the replayed table's own optimum scored on the same passes
(full knowledge of the table: a run level with it has nothing left to learn from that table; a
point slow on the scoring passes alone is one the table itself reads fast); ``--out`` writes
the per-run rows (CSV) and the table (markdown) with their provenance.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from bench_inputs import MODEL_SEEDS, parse_seeds
from benchkit import inputs_peers as peers
from benchkit import inputs_project as project
from benchkit.inputs_truth import Truth, point_fractions, summarize_fractions
from benchkit.provenance import header, provenance

RESULTS = Path(__file__).resolve().parent / "results"
#: a point "slower than 1.5x the optimum" (issue 39, Done when 1 (b))
LOW = 0.67
#: column prefix of a budgeted peer's geomean in the per-run rows (``--peers``)
PEER = "peer: "
PROBLEMS = {
    "demo": lambda: project.demo_problem(64),
    "lu": lambda: project.lu_problem(10),
    "gemm": lambda: project.gemm_problem(5),
    "gemm_cuda": lambda: project.gemm_cuda_problem(5),
}


def run_case(
    case: str,
    seeds: Sequence[int],
    settings: Sequence[str],
    label: str,
    workdir: Path,
    truth_csv: Path | None = None,
    with_peers: bool = False,
    tables: Sequence[Path] = (),
    emulate: str | None = None,
    drift: tuple[float, float] = (0.0, 0.0),
) -> pd.DataFrame:
    """One row per (table, seed): the header's scores at every point of the case's truth.
    The tables are the truth's passes, or ``tables`` (scored on every pass); with
    ``emulate``, kernels emulated from ``tables``, with the truth's measurement noise
    (``passes``) or none (``none``: each cell reads the table's value every time)."""
    problem = PROBLEMS[case]()
    cells = pd.read_csv(truth_csv or RESULTS / f"bench_inputs_truth_{case}.csv", comment="#")
    noise = None
    if emulate is not None:
        noise = project.pass_noise(cells) if emulate == "passes" else np.zeros(1)
    rows = []
    replayed = replayed_tables(problem, cells, tables)
    for index, (name, source, column, table, truth) in enumerate(replayed):
        for seed in seeds:
            drawn_from = table
            if noise is not None:
                path = (
                    tables[index]
                    if tables
                    else project.pass_table(problem, source, column, workdir / name, column)
                )
                result = project.run_emulated(
                    problem, path, noise, truth, seed, workdir / name, settings, drift
                )
                # the peers measure the cells they draw once, with the same noise
                drawn_from = noisy_table(table, noise, seed, drift[0])
            else:
                result = project.run_truth_replay(
                    problem,
                    source,
                    truth,
                    seed,
                    workdir / name,
                    column=column,
                    settings=settings,
                )
            fractions = point_fractions(truth, result.answers)
            summary = summarize_fractions(fractions)
            # the replayed table's own view: its optimum at every point (full knowledge of the
            # table, scored like the header), and the header's slow points that the table
            # finds slow too (a point slow on the scoring passes alone is the table's reading)
            slow_too = (fractions < LOW) & (point_fractions(table, result.answers) < LOW)
            table_best = point_fractions(truth, table.best_config())
            own_runs = [
                summarize_fractions(
                    point_fractions(
                        truth,
                        peers.lightgbm_argmin(
                            truth, result.samples, result.sample_times, seed=model
                        ),
                    )
                )
                for model in range(MODEL_SEEDS)
            ]
            own = np.mean([run["geomean"] for run in own_runs])
            own_low = np.median([run["below_0.67"] for run in own_runs])
            drawn = (
                peers.peer_answers(
                    drawn_from, problem.budget, np.random.default_rng([seed, problem.budget])
                )
                if with_peers
                else {}
            )
            rows.append(
                {
                    "case": case,
                    "label": label,
                    "table": name,
                    "seed": seed,
                    **summary,
                    "own_samples_model": float(own),
                    "own_samples_model_below_0.67": float(own_low),
                    "table_optimum": summarize_fractions(table_best)["geomean"],
                    "below_0.67_on_table_too": float(slow_too.sum()),
                    "tune_seconds": result.tune_seconds,
                    **{
                        f"{PEER}{name}": summarize_fractions(point_fractions(truth, answers))[
                            "geomean"
                        ]
                        for name, answers in drawn.items()
                    },
                }
            )
            print(
                f"{case} {label} {name} seed {seed}: geomean {summary['geomean']:.4f}, "
                f"worst {summary['worst']:.3f}, LightGBM on its samples {own:.4f}",
                flush=True,
            )
    return pd.DataFrame(rows)


def replayed_tables(
    problem: project.Problem, cells: pd.DataFrame, tables: Sequence[Path]
) -> list[tuple[str, pd.DataFrame, str, Truth, Truth]]:
    """``(name, cells, column, table, scoring truth)`` per replayed table: each pass of the
    truth scored on the others, or each of ``tables`` scored on every pass."""
    if not tables:
        passes = project.passes_of(cells)
        if len(passes) < 2:
            raise SystemExit(
                f"{problem.name}: the truth has {len(passes)} pass; out of sample needs two"
            )
        return [(p, cells, p, *project.table_and_scoring(problem, cells, p)[:2]) for p in passes]
    truth = project.truth_of(problem, cells)
    out = []
    for path in tables:
        source = pd.read_csv(path, comment="#")
        missing = sorted({*truth.inputs.columns, *truth.configs.columns, "time"} - {*source})
        if missing:
            raise SystemExit(
                f"{path}: no column {', '.join(missing)} (a table of the case's cells)"
            )
        table = project.truth_of(problem, source)
        differ = project.cells_differ(table, truth)
        if differ:
            raise SystemExit(f"{path}: {differ}")
        out.append((path.stem, source, "time", table, truth))
    return out


def noisy_table(table: Truth, noise: np.ndarray, seed: int, drift_sd: float = 0.0) -> Truth:
    """``table`` with every cell's time multiplied by ``exp(e)``, ``e`` drawn from ``noise``
    (seeded by ``seed``): the cells as one live measurement of each reads them; with
    ``drift_sd``, each cell also slowed by ``exp(max(0, N(0, drift_sd)))``, drawn
    independently (a pass in shuffled order meets the drift's marginal)."""
    rng = np.random.default_rng([seed, 29])
    drawn = rng.choice(noise, size=table.times.shape)
    if drift_sd > 0:
        slow = np.random.default_rng([seed, 31]).normal(0.0, drift_sd, table.times.shape)
        drawn = drawn + np.maximum(0.0, slow)
    return replace(table, times=table.times * np.exp(drawn))


def parse_drift(text: str) -> tuple[float, float]:
    """``SD,RHO`` of ``--drift``: SD >= 0, 0 <= RHO < 1."""
    parts = text.split(",")
    try:
        sd, rho = (float(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--drift {text!r}: give SD,RHO, two numbers (e.g. 0.3,0.8)"
        ) from None
    if not (sd >= 0 and 0 <= rho < 1):
        raise argparse.ArgumentTypeError(f"--drift {text!r}: SD must be >= 0 and RHO in [0, 1)")
    return sd, rho


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """Per case and label: the runs' geomean (mean, sd, lowest), worst point, points below 0.67,
    and the header minus the LightGBM argmin on its own samples (mean, lowest, runs below -0.02),
    and the runs where the header has a point below 0.67 and that model has none (the median
    over its model seeds of its points below 0.67 is 0: issue 39, Done when 1 (b)), of which
    those where such a point is below 0.67 on the replayed table too (a choice the table itself
    finds slow; the others are slow only on the scoring passes: the table's reading there), and
    the replayed table's own optimum scored like the header (full knowledge of the table; NaN
    for rows written before these columns)."""
    slow_too = rows.get("below_0.67_on_table_too", pd.Series(np.nan, index=rows.index))
    rows = rows.assign(
        gap=rows["geomean"] - rows["own_samples_model"],
        slower_alone=(rows["below_0.67"] > 0) & (rows["own_samples_model_below_0.67"] == 0),
        table_optimum=rows.get("table_optimum", pd.Series(np.nan, index=rows.index)),
    )
    rows = rows.assign(on_table_too=rows["slower_alone"] & (slow_too > 0))
    grouped = rows.groupby(["case", "label"], sort=False)
    return pd.DataFrame(
        {
            "runs": grouped.size(),
            "geomean": grouped["geomean"].mean(),
            "sd": grouped["geomean"].std(ddof=1),
            "lowest run": grouped["geomean"].min(),
            "worst point": grouped["worst"].min(),
            "points < 0.67 (mean)": grouped["below_0.67"].mean(),
            "gap": grouped["gap"].mean(),
            "lowest gap": grouped["gap"].min(),
            "runs > 0.02 below": grouped["gap"].apply(lambda g: int((g < -0.02).sum())),
            "runs slower than 1.5x where the model is not": grouped["slower_alone"].sum(),
            "of them, slower on the table too": grouped["on_table_too"].sum(),
            "table optimum": grouped["table_optimum"].mean(),
        }
    ).reset_index()


def peers_summary(rows: pd.DataFrame) -> str:
    """Per case and label, each budgeted peer beside the header: the peer's geomean (mean ±
    sd of the runs) and the header minus the peer, paired by run (mean, lowest, runs where the
    header is better)."""
    columns = [c for c in rows.columns if c.startswith(PEER)]
    if not columns:
        return ""
    lines = [
        "| case | label | tool | geomean | header - tool: mean | lowest | runs header better |",
        "|---|---|---|---|---|---|---|",
    ]
    for (case, label), group in rows.groupby(["case", "label"], sort=False):
        for column in columns:
            gap = group["geomean"] - group[column]
            lines.append(
                f"| {case} | {label} | {column[len(PEER) :]} | {group[column].mean():.4f} ± "
                f"{group[column].std(ddof=1):.4f} | {gap.mean():+.4f} | {gap.min():+.4f} "
                f"| {int((gap > 0).sum())} of {len(gap)} |"
            )
    return "\n".join(lines) + "\n"


def markdown(summary: pd.DataFrame) -> str:
    lines = [
        "| case | label | runs | geomean | lowest run | worst point | points < 0.67 "
        "| header - LightGBM on its samples: mean | lowest | runs > 0.02 below "
        "| runs with a point < 0.67 where that model has none "
        "| of them, with such a point < 0.67 on the replayed table too "
        "| the replayed table's optimum |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in summary.itertuples(index=False):
        lines.append(
            f"| {row[0]} | {row[1]} | {row[2]} | {row[3]:.4f} ± {row[4]:.4f} | {row[5]:.4f} "
            f"| {row[6]:.3f} | {row[7]:.1f} | {row[8]:+.4f} | {row[9]:+.4f} | {row[10]} "
            f"| {row[11]} | {row[12]} | {row[13]:.4f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--case", nargs="+", choices=sorted(PROBLEMS), default=["demo", "lu", "gemm"]
    )
    parser.add_argument("--seeds", default="0-2")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="a configuration setting of every campaign (repeatable), e.g. trees.max_configs=3",
    )
    parser.add_argument("--label", help="the variant's name in the table (default: the --set)")
    parser.add_argument("--truth", type=Path, help="a truth CSV (one case only)")
    parser.add_argument(
        "--tables",
        nargs="+",
        type=Path,
        default=[],
        metavar="CSV",
        help="replay these tables of the case's cells (measured at another time than the "
        "truth) instead of the truth's passes, each scored on every pass (one case only)",
    )
    parser.add_argument(
        "--emulate",
        nargs="?",
        const="passes",
        choices=["passes", "none"],
        help="tune on kernels emulated from the tables (--tables, or each pass of the truth; "
        "their times "
        "interpolated between their points, a measurement's noise as the truth's passes "
        "differ, drawn afresh at each measurement), sampling the inputs' whole range as a live "
        "campaign does; the peers draw from the tables with that noise (``--emulate none``: "
        "no noise, a cell reads its table value every time)",
    )
    parser.add_argument(
        "--drift",
        type=parse_drift,
        default=(0.0, 0.0),
        metavar="SD,RHO",
        help="with --emulate: slow moments that last over successive measurements, an AR(1) "
        "series in the log time (standard deviation SD, correlation RHO from one measurement "
        "to the next), its positive part added to every measurement (default: none)",
    )
    parser.add_argument("--workdir", type=Path, help="campaign folders (default: a temporary one)")
    parser.add_argument("--out", type=Path, help="write OUT.csv and OUT.md")
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also score bench_inputs.py's budgeted peers on each run's table pass (same "
        "budget, same scoring passes), paired with the header",
    )
    args = parser.parse_args(argv)
    if args.truth is not None and len(args.case) != 1:
        parser.error("--truth needs exactly one --case")
    if args.tables and len(args.case) != 1:
        parser.error("--tables needs exactly one --case")
    if args.drift[0] > 0 and args.emulate is None:
        parser.error("--drift needs --emulate (a replay reads its table's values)")
    label = args.label or (" ".join(args.set) if args.set else "defaults")
    seeds = parse_seeds(args.seeds)
    lines = provenance(list(argv) if argv is not None else None)
    with tempfile.TemporaryDirectory(prefix="pass_replays_") as scratch:
        workdir = args.workdir or Path(scratch)
        frames = [
            run_case(
                case,
                seeds,
                args.set,
                label,
                workdir / case,
                args.truth,
                args.peers,
                args.tables,
                args.emulate,
                args.drift,
            )
            for case in args.case
        ]
    rows = pd.concat(frames, ignore_index=True)
    table = markdown(summarize(rows))
    if args.peers:
        table += "\n" + peers_summary(rows)
    print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.with_suffix(".csv").open("w") as handle:
            handle.write(header(lines))
            rows.to_csv(handle, index=False)
        notes = f"- settings: {shlex.join(args.set) if args.set else 'the defaults'}\n"
        args.out.with_suffix(".md").write_text(header(lines, markdown=True) + table + "\n" + notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
