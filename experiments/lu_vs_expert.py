"""The shipped blocked LU tuned at several budgets, validated against the LAPACK-style expert
default (block size 64, recursive panel, all threads) and merged with it; OpenBLAS's
``scipy.linalg.lu_factor`` timed at the same inputs for orientation.

For each budget: tune (``experiments/configs/lu.toml`` with that budget; a finished campaign
directory is resumed, ``--reuse BUDGET=DIR`` copies one first), validate on the ``--grid``
validation grid (cell centres, not on the optimization grid) with ``--repeats`` interleaved
measurements per configuration and point, merge with the expert (joint tree of the
decisions, ``lu_merged.h``), validate the merged header again at the same points, and time
OpenBLAS. Writes ``lu_vs_expert.md`` / ``.json`` / ``.csv`` and figures next to them.

    python experiments/lu_vs_expert.py --budgets 1000 --grid 16x16 --work runs/lu_vs_expert \\
        --reuse 1000=runs/lu1000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from benchkit import provenance

from mlkaps_gpu.campaign import Campaign, parse_config
from mlkaps_gpu.validation import (
    HeadroomSettings,
    Validation,
    describe_merge,
    expert_reference,
    merge,
    parse_grid,
    reassess,
    validate,
    write_merge,
    write_validation,
)

CONFIG = Path(__file__).parent / "configs" / "lu.toml"
RESULTS = Path(__file__).parent / "results"


def campaign_for(budget: int, work: Path, reuse: dict[int, Path]) -> Campaign:
    """Create, copy or resume the campaign of one budget and run its stages."""
    text = CONFIG.read_text(encoding="utf-8")
    if "budget = 1000" not in text:
        raise SystemExit(f"{CONFIG}: expected 'budget = 1000' to substitute")
    text = text.replace("budget = 1000", f"budget = {budget}")
    config = parse_config(text, path=CONFIG, label=CONFIG.name)
    directory = work / f"lu{budget}"
    if budget in reuse:
        if not directory.exists():
            shutil.copytree(reuse[budget], directory)
            print(f"budget {budget}: copied {reuse[budget]} to {directory}", flush=True)
        # a reused campaign keeps the configuration it was tuned with
        campaign = Campaign.open(directory)
    else:
        campaign = Campaign.create_or_resume(config, directory)
    started = time.perf_counter()
    campaign.run()
    print(f"budget {budget}: campaign ready in {time.perf_counter() - started:.0f} s", flush=True)
    return campaign


def time_openblas(points: pd.DataFrame, *, repeats: int, seed: int) -> np.ndarray:
    """Median seconds of ``scipy.linalg.lu_factor`` (OpenBLAS getrf) per point."""
    from scipy.linalg import lu_factor

    rng = np.random.default_rng(seed)
    out = np.empty(len(points))
    for index, (m, n) in enumerate(points[["m", "n"]].itertuples(index=False)):
        matrix = rng.standard_normal((int(m), int(n)))
        times = []
        for run in range(repeats + 1):  # one warm-up run
            work = matrix.copy(order="F")
            begin = time.perf_counter()
            lu_factor(work, overwrite_a=True, check_finite=False)
            if run:
                times.append(time.perf_counter() - begin)
        out[index] = float(np.median(times))
    return out


def previous_openblas(
    args: argparse.Namespace, budget: int, points: pd.DataFrame
) -> np.ndarray | None:
    """With --resume-merge, the OpenBLAS times of the previous tables for the same points."""
    path = args.out / f"lu_vs_expert{args.tag}.csv"
    if not args.resume_merge or not path.exists():
        return None
    table = pd.read_csv(path, comment="#")
    table = table[table["budget"] == budget]
    if table[["m", "n"]].to_numpy().tolist() != points[["m", "n"]].to_numpy().tolist():
        return None
    return table["openblas_s"].to_numpy(dtype=float)


def headline(summary: dict[str, Any]) -> dict[str, Any]:
    worst = summary.get("worst") or {}
    return {
        "geomean speedup": summary["geomean_speedup"],
        "progressions": summary["progressions"]["share"],
        "mean speedup of progressions": summary["progressions"]["mean_speedup"],
        "regressions": summary["regressions"]["share"],
        "mean slowdown of regressions": summary["regressions"]["mean_slowdown"],
        "worst speedup": worst.get("speedup"),
        "worst slowdown": worst.get("slowdown"),
        "worst at": worst.get("inputs"),
        "worst verdict": worst.get("verdict"),
        "noise threshold": summary["noise_threshold"],
        "noise threshold p90": summary["noise_threshold_p90"],
        "same configuration": summary["same_configuration"],
        "false calls bound": summary["false_calls_bound"],
        "same-configuration spread p95": (summary.get("same_configuration_spread") or {}).get(
            "p95"
        ),
        "points": summary["compared"],
        "load average": summary.get("load_average"),
        "run": summary.get("run"),
    }


def figure_copies(budget: int, campaign: Campaign, out: Path) -> list[str]:
    names = []
    for stage, folder in (("before", "merge/before"), ("after", "merge/after")):
        for figure in ("speedup_map", "speedup_histogram"):
            source = campaign.directory / folder / f"{figure}.png"
            if source.exists():
                target = out / f"lu_vs_expert_b{budget}_{figure}_{stage}.png"
                shutil.copyfile(source, target)
                names.append(target.name)
    return names


def run_budget(budget: int, args: argparse.Namespace, reuse: dict[int, Path]) -> dict[str, Any]:
    campaign = campaign_for(budget, args.work, reuse)
    expert = expert_reference(campaign)
    sizes = parse_grid(args.grid, campaign.sampling_space)
    validation_dir = campaign.directory / "validation"
    started = time.perf_counter()
    if args.resume_validation and (validation_dir / "summary.json").exists():
        # the stored measurements, assessed with the current statistics
        before = reassess(Validation.load(validation_dir), campaign.space, seed=args.seed)
        write_validation(before, validation_dir, campaign.space)
    else:
        before = validate(campaign, expert, sizes=sizes, repeats=args.repeats, seed=args.seed)
        write_validation(before, validation_dir, campaign.space)
    validate_seconds = time.perf_counter() - started
    print(f"budget {budget}: {before.describe()} [{validate_seconds:.0f} s]", flush=True)
    started = time.perf_counter()
    merge_dir = campaign.directory / "merge"
    if args.resume_merge and (merge_dir / "summary.json").exists():
        summary = json.loads((merge_dir / "summary.json").read_text())
        after = Validation.load(merge_dir / "after")
        decisions = pd.read_csv(merge_dir / "decisions.csv")
        for stage in ("before", "after"):  # redraw the figures
            write_validation(Validation.load(merge_dir / stage), merge_dir / stage, campaign.space)
    else:
        headroom = HeadroomSettings(seed=args.seed)
        result = merge(campaign, expert, before=before, seed=args.seed, headroom=headroom)
        write_merge(result, merge_dir, campaign.space)
        summary, after, decisions = result.summary, result.after, result.decisions
    merge_seconds = time.perf_counter() - started
    print(f"budget {budget}: merge [{merge_seconds:.0f} s]\n{describe_merge(summary)}", flush=True)
    campaign.setup.executor.close()

    points = before.points
    openblas = previous_openblas(args, budget, points)
    if openblas is None:
        openblas = time_openblas(points, repeats=args.repeats, seed=args.seed)
    after = after.points
    design = campaign.space.design_names
    table = points[campaign.space.input_names].copy()
    table.insert(0, "budget", budget)
    for name in design:
        table[f"tuned_{name}"] = points[f"tuned_{name}"]
    for name in design:
        table[f"merged_{name}"] = after[f"tuned_{name}"]
    for name in design:
        table[f"expert_{name}"] = points[f"reference_{name}"]
    table["tuned_s"] = np.exp(points["tuned_cost"])
    table["expert_s"] = np.exp(points["reference_cost"])
    table["speedup_before"] = points["speedup"]
    table["verdict_before"] = points["verdict"]
    table["merged_s"] = np.exp(after["tuned_cost"])
    table["expert_again_s"] = np.exp(after["reference_cost"])
    table["speedup_after"] = after["speedup"]
    table["verdict_after"] = after["verdict"]
    table["kept"] = decisions["source"]
    table["openblas_s"] = openblas
    meta = campaign.meta.get("details", {})
    record = {
        "budget": budget,
        "directory": f"WORK/{campaign.directory.name}",  # WORK: the --work folder
        "grid": sizes,
        "repeats": args.repeats,
        "sampling": meta.get("sampling", {}),
        "tree": {k: v for k, v in meta.get("trees", {}).items() if k != "depth_sweep"},
        "config": (campaign.directory / "config.toml").read_text(encoding="utf-8"),
        "before": headline(summary["before"]),
        "after": headline(summary["after"]),
        "merge": {
            k: summary.get(k)
            for k in ("kept_tuned", "kept_expert", "tree_agreement", "header", "verification")
        }
        | {"tree": {k: v for k, v in summary["tree"].items() if k != "depth_sweep"}}
        | {"shipped": summary.get("shipped", "merged"), "headroom": _headroom(summary)},
        "openblas": {
            "geomean tuned / openblas": float(np.exp(np.mean(np.log(table["tuned_s"] / openblas)))),
            "geomean expert / openblas": float(
                np.exp(np.mean(np.log(table["expert_s"] / openblas)))
            ),
            "geomean merged / openblas": float(
                np.exp(np.mean(np.log(table["merged_s"] / openblas)))
            ),
        },
        "seconds": {
            "validate": summary["before"].get("seconds", round(validate_seconds)),
            "merge (fit, export, validate again)": round(merge_seconds),
            "validate again": summary["after"].get("seconds"),
        },
        "figures": figure_copies(budget, campaign, args.out),
    }
    return {"record": record, "table": table}


def _provenance_lines() -> list[str]:
    """Commit, date and machine of the run (:mod:`benchkit.provenance`)."""
    return [
        f"Commit: {provenance.commit()}; date: {provenance.date()}; machine: "
        f"{os.cpu_count()} cores, {provenance.cpu_model()}, no GPU used"
    ]


def _headroom(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The merge's headroom summary (a local search around the expert), without the points."""
    headroom = summary.get("headroom")
    if not headroom:
        return None
    return {k: v for k, v in headroom.items() if k != "points"} | {
        "points measured": len(headroom.get("points", []))
    }


def _headroom_line(record: dict[str, Any]) -> str:
    merge_info = record["merge"]
    headroom = merge_info.get("headroom")
    if not headroom or headroom.get("geomean_headroom") is None:
        return f"| {record['budget']} | {merge_info.get('shipped', 'merged')} | - | - | - | - |"
    share = headroom.get("median_share_reached")
    return (
        f"| {record['budget']} | {merge_info.get('shipped', 'merged')} | "
        f"{headroom['geomean_headroom']:.3f}x | {headroom['points measured']} | "
        f"{headroom['points_with_headroom']} | "
        f"{'-' if share is None else f'{100 * share:.0f}%'} |"
    )


def markdown(records: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        "# Blocked LU (`lu`): tuned vs the LAPACK-style expert, before and after merge",
        "",
        f"Command: `python experiments/lu_vs_expert.py {command_line(sys.argv[1:])}`",
        "",
        *_provenance_lines(),
        "",
        "Expert: nb 64, recursive panel, tile 32 x 64, all threads. Validation grid: cell "
        "centres (geometric) of the given number of cells per input, so no point lies on the "
        "16 x 16 optimization grid except where integer rounding merges values. Per point "
        f"{args.repeats} rounds; in each the two configurations are measured back to back "
        "(order alternating), each measurement one executor call (1 warm-up, 5 timed runs, "
        "median) stored in the campaign store. Speedup = median over the rounds of expert / "
        "tuned. A point is a progression / regression when the one-sided Wilcoxon signed-rank "
        "test on the per-round log ratios gives p < 0.05 (with 5 rounds: all five agree) *and* "
        "the speedup lies beyond the point's noise threshold: the 95th percentile over every "
        "sign flip of |median of the per-round log ratios minus their median| (the A/A spread "
        "of the reported speedup given the point's own round-to-round noise). 'same' points "
        "(merged header = expert's configuration) cannot be progressions or regressions; their "
        "measured ratios are A/A noise. 'false calls bound' = 0.05 x points with differing "
        "configurations: the expected number of false calls per direction is below it.",
        "",
        "| budget | stage | geomean speedup | progressions | mean speedup (prog.) | "
        "regressions | mean slowdown (regr.) | worst speedup (differing configs) | worst at | "
        "noise threshold median / p90 | same config. points | false calls bound |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        for stage in ("before", "after"):
            h = record[stage]
            lines.append(
                f"| {record['budget']} | {stage} merge | {h['geomean speedup']:.3f}x | "
                f"{100 * h['progressions']:.1f}% | {_x(h['mean speedup of progressions'])} | "
                f"{100 * h['regressions']:.1f}% | {_x(h['mean slowdown of regressions'])} | "
                f"{_x(h['worst speedup'])} ({h['worst verdict']}) | "
                f"{', '.join(f'{k}={v}' for k, v in (h['worst at'] or {}).items())} | "
                f"+-{100 * h['noise threshold']:.1f}% / +-{100 * h['noise threshold p90']:.0f}% | "
                f"{h['same configuration']} | {h['false calls bound']:.1f} |"
            )
    lines += [
        "",
        "| budget | kept tuned / expert | merged tree | tree agrees | "
        "tuned / OpenBLAS | expert / OpenBLAS | merged / OpenBLAS | sampling s | "
        "validate s | validate again s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for record in records:
        merge_info, blas = record["merge"], record["openblas"]
        tree = merge_info["tree"]
        lines.append(
            f"| {record['budget']} | {merge_info['kept_tuned']} / {merge_info['kept_expert']} | "
            f"{tree['mode']}, depth {tree['depth']}, {tree['leaves']} leaves | "
            f"{100 * merge_info['tree_agreement']:.1f}% | "
            f"{blas['geomean tuned / openblas']:.2f} | {blas['geomean expert / openblas']:.2f} | "
            f"{blas['geomean merged / openblas']:.2f} | "
            f"{record['sampling'].get('wall_seconds', '-')} | {record['seconds']['validate']} | "
            f"{record['seconds']['validate again']} |"
        )
    lines += [
        "",
        "Headroom: at evenly spread validation points, the expert and up to 6 of its valid "
        "one-parameter neighbours measured 3 rounds each; headroom = expert / best of them "
        "(geomean); share = log(shipped speedup) / log(headroom) where the headroom is beyond "
        "the point's noise (median).",
        "",
        "| budget | ships | headroom (geomean) | points | points beyond noise | share reached |",
        "|---|---|---|---|---|---|",
        *(_headroom_line(record) for record in records),
    ]
    lines += [
        "",
        "| budget | stage | run | load average (start, end) | same-configuration points | "
        "their A/A spread (p95 of abs. log ratio) | false calls bound |",
        "|---|---|---|---|---|---|---|",
    ]
    for record in records:
        for stage in ("before", "after"):
            h = record[stage]
            spread = h["same-configuration spread p95"]
            lines.append(
                f"| {record['budget']} | {stage} merge | {h['run']} | {h['load average']} | "
                f"{h['same configuration']} | "
                f"{'-' if spread is None else f'+-{100 * spread:.1f}%'} | "
                f"{h['false calls bound']:.1f} |"
            )
    lines += ["", "Figures:", ""]
    for record in records:
        lines += [f"![{name}]({name})" for name in record["figures"]]
    return "\n".join(lines) + "\n"


def command_line(arguments: list[str]) -> str:
    """The arguments with folder values written as WORK / SOURCE (no paths of this machine)."""
    shown, hide = [], None
    for argument in arguments:
        if hide == "--work":
            argument = "WORK"
        elif hide == "--reuse":
            argument = argument.partition("=")[0] + "=SOURCE"
        hide = argument if argument in ("--work", "--reuse") else None
        shown.append(argument)
    return " ".join(shown)


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", default="1000,3000,10000")
    parser.add_argument("--grid", default="32x32")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("runs/lu_vs_expert"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--reuse",
        action="append",
        default=[],
        metavar="BUDGET=DIR",
        help="copy a finished campaign of that budget instead of tuning",
    )
    parser.add_argument(
        "--resume-validation",
        action="store_true",
        help="reuse DIR/validation of a campaign when present (skip the first comparison)",
    )
    parser.add_argument(
        "--resume-merge",
        action="store_true",
        help="reuse DIR/merge of a campaign when present (rebuild the tables only)",
    )
    parser.add_argument("--tag", default="", help="suffix of the result file names")
    args = parser.parse_args()
    reuse = {int(k): Path(v) for k, _, v in (item.partition("=") for item in args.reuse)}
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    records, tables = [], []
    for budget in (int(b) for b in args.budgets.split(",")):
        outcome = run_budget(budget, args, reuse)
        records.append(outcome["record"])
        tables.append(outcome["table"])
        stem = args.out / f"lu_vs_expert{args.tag}"
        provenance.write_csv(pd.concat(tables, ignore_index=True), f"{stem}.csv", index=False)
        Path(f"{stem}.json").write_text(json.dumps(records, indent=2, default=str) + "\n")
        Path(f"{stem}.md").write_text(markdown(records, args))
        print(f"written {stem}.md / .json / .csv", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
