"""The markdown, CSV and figure of a benchmark case."""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from benchkit.cases import Case, data_path_label
from benchkit.metrics import (
    done_when_2_counts,
    lead_over_best_peer,
    lead_per_input,
    mean_sd,
    summarize_runs,
)
from benchkit.provenance import header, markdown_lines, versions
from benchkit.tools import BEST_MEASURED, HEADER, RANDOM, tool_rows_order


def format_cell(mean: float, sd: float, exact: bool = False) -> str:
    """``mean ± sd`` (or ``mean (exact)``) to three decimals; ``n/a`` when not finite."""
    if not math.isfinite(mean):
        return "n/a"
    return f"{mean:.3f} (exact)" if exact else f"{mean:.3f} ± {sd:.3f}"


def lead_per_input_markdown(rows: pd.DataFrame) -> list[str]:
    """The :func:`lead_per_input` table as markdown lines (empty without a header or a peer)."""
    lead = lead_per_input(rows)
    if lead.empty:
        return []
    lines = [
        "",
        "Per input value: the header's mean fraction over seeds against the best peer at that "
        "value (the peer with the highest mean there).",
        "",
        "| input | b | header | best peer there | peer | difference |",
        "|---|---|---|---|---|---|",
    ]
    for row in lead.to_dict("records"):
        lines.append(
            f"| {row['input']} | {row['b']} | {row['header']:.3f} | {row['peer']} | "
            f"{row['best_peer']:.3f} | {row['difference']:+.3f} |"
        )
    return lines


def frame_markdown(table: pd.DataFrame, digits: int = 4) -> str:
    """``table`` as a plain markdown table, its floats to ``digits`` decimals."""

    def cell(value: object) -> str:
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(map(str, table.columns)) + " |", "|---" * table.shape[1] + "|"]
    lines += [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)
    ]
    return "\n".join(lines)


def table_markdown(
    summary: pd.DataFrame, budgets: Sequence[int], order: Sequence[str], missing: Mapping[str, str]
) -> list[str]:
    """The mean ± sd table: a row per tool and a column per b, then the best peer per b."""
    lines = [
        "| tool | " + " | ".join(f"b = {b}" for b in budgets) + " |",
        "|---|" + "---|" * len(budgets),
    ]
    for tool in order:
        if tool in missing:
            lines.append(f"| {tool} | " + " | ".join(missing[tool] for _ in budgets) + " |")
            continue
        part = summary[summary["tool"] == tool].set_index("b")
        if part.empty:
            continue
        cells = []
        for b in budgets:
            if b in part.index:
                row = part.loc[b]
                cells.append(format_cell(row["mean"], row["sd"], exact=tool == RANDOM))
            else:
                cells.append("n/a")
        lines.append(f"| {tool} | " + " | ".join(cells) + " |")
    peers = summary[~summary["tool"].isin([HEADER, BEST_MEASURED])]
    if not peers.empty and (summary["tool"] == HEADER).any():
        cells = []
        for b in budgets:
            at = peers[peers["b"] == b]
            if at.empty:
                cells.append("n/a")
                continue
            top = at.loc[at["mean"].idxmax()]
            header = summary[(summary["tool"] == HEADER) & (summary["b"] == b)]
            verdict = ""
            if not header.empty:
                verdict = " (header above)" if header["mean"].iloc[0] > top["mean"] else ""
            cells.append(f"{top['mean']:.3f} {top['tool']}{verdict}")
        lines.append("| best peer (mean) | " + " | ".join(cells) + " |")
    return lines


def write_figure(summary: pd.DataFrame, order: Sequence[str], path: Path, title: str) -> bool:
    """Fraction of optimum against b per tool, as a PNG; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(9.5, 4.8))
    for tool in order:
        part = summary[summary["tool"] == tool].sort_values("b")
        if part.empty:
            continue
        style = {"linewidth": 2.4} if tool.startswith("project") else {"linewidth": 1.2}
        if tool == RANDOM:
            style |= {"linestyle": "--", "color": "black"}
        axes.errorbar(
            part["b"], part["mean"], yerr=part["sd"], marker="o", capsize=3, label=tool, **style
        )
    axes.set_xscale("log")
    budgets = sorted(summary["b"].unique())
    axes.set_xticks(budgets)
    axes.set_xticks([], minor=True)
    axes.set_xticklabels([str(b) for b in budgets])
    axes.set_xlabel("evaluations per input value (b)")
    axes.set_ylabel("fraction of optimum (geomean over inputs)")
    axes.set_ylim(0, 1.02)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def require_files(parser: argparse.ArgumentParser, paths: Iterable[Path]) -> None:
    """Exit 2 through ``parser`` naming the first of ``paths`` that is no file."""
    for path in paths:
        if not path.is_file():
            parser.error(f"no such file: {path}")


def read_case_rows(path: Path, case: str) -> pd.DataFrame:
    """The rows of ``case`` in a CSV this script wrote (ValueError naming the file when it is
    not one)."""
    table = pd.read_csv(path, comment="#")
    missing = {"tool", "case", "b", "seed", "input", "fraction"} - set(table.columns)
    if missing:
        raise ValueError(f"{path}: not a bench_peers CSV (no {', '.join(sorted(missing))})")
    return table[table["case"] == case]


def _header_lines(
    case: Case, args: argparse.Namespace, budgets: Sequence[int], seeds: Sequence[int]
) -> list[str]:
    """Title, provenance, data, budgets and seeds, what was stripped, how the table reads."""
    return [
        f"# bench_peers: {case.name}",
        "",
        *markdown_lines(args.command_line),
        f"- versions: {versions()}",
        "- data: "
        + ", ".join(f"{land.value}: `{data_path_label(land.source)}`" for land in case.landscapes),
        f"- input `{case.input_name}` ({len(case.landscapes)} values), budgets b per input value "
        f"{list(budgets)}, seeds {list(seeds)}; "
        + (
            "each input value is its own project campaign of b evaluations (`--separately`: "
            "nothing learnt from the other values)"
            if case.separate
            else f"a project campaign gets B = {len(case.landscapes)} b evaluations"
        ),
        f"- project config: `{case.config_path.name}` stripped to the problem "
        f"(removed: {', '.join(case.removed) or 'nothing'})"
        + (f"; overrides: {', '.join(args.set)}" if args.set else "")
        + (f"; extra: {Path(args.config_extra).name}" if args.config_extra else ""),
        "",
        "Fraction of optimum t_opt / t(choice) (0 if the choice failed), geomean over input "
        "values, mean ± sd (ddof=1) over seeds. Random search: exact expectation of the best of b "
        "distinct uniform draws, E[t_opt / t], per input value, then geomean (no seeds).",
        "",
    ]


def _done_when_2_lines(counts: pd.DataFrame) -> list[str]:
    """The header against the campaign's best measured configuration (empty without rows)."""
    if not len(counts):
        return []
    lines = [
        "",
        "Header vs the best configuration the same campaign measured (issue 18, Done when 2): "
        "(input, seed) runs where t(best measured) / t(header) < 0.99 and < 0.9.",
        "",
        "| b | runs | below 0.99 | below 0.9 | min ratio |",
        "|---|---|---|---|---|",
    ]
    for row in counts.to_dict("records"):
        lines.append(
            f"| {int(row['b'])} | {int(row['runs'])} | {int(row['below_0.99'])} | "
            f"{int(row['below_0.9'])} | {row['min_ratio']:.3f} |"
        )
    total = counts[["runs", "below_0.99", "below_0.9"]].sum().astype(int)
    lines.append(
        f"| all | {total['runs']} | {total['below_0.99']} | {total['below_0.9']} | "
        f"{counts['min_ratio'].min():.3f} |"
    )
    return lines


def _lead_lines(lead: pd.DataFrame, seeds: Sequence[int]) -> list[str]:
    """The header minus the best peer per b, with its interval (empty without rows)."""
    if not len(lead):
        return []
    lines = [
        "",
        "Header minus the best peer (highest mean at that b), mean fraction over seeds, with "
        "a 95 % bootstrap confidence interval (seeds resampled; `within noise`: the interval "
        f"holds 0, these {len(seeds)} seeds cannot tell the two apart).",
        "",
        "| b | best peer | header | peer | difference | 95 % interval | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in lead.to_dict("records"):
        lines.append(
            f"| {row['b']} | {row['peer']} | {row['header']:.3f} | {row['best_peer']:.3f} | "
            f"{row['difference']:+.3f} | [{row['low']:+.3f}, {row['high']:+.3f}] | "
            f"{row['verdict']} |"
        )
    return lines


def _tune_lines(case: Case, tune: Mapping[int, list[float]]) -> list[str]:
    """The project's ``tune`` wall time per budget (empty when it did not run)."""
    if not any(tune.values()):
        return []
    lines = [
        "",
        "Project `tune` wall time per "
        + (
            "run (the sum of its campaigns, one per input value; "
            if case.separate
            else "campaign ("
        )
        + "create, sample, model, optimize, trees, verified header), seconds:",
        "",
        "| b | B | mean | sd | max |",
        "|---|---|---|---|---|",
    ]
    for b, values in tune.items():
        if values:
            mean, sd = mean_sd(values)
            lines.append(
                f"| {b} | {len(case.landscapes) * b} | {mean:.1f} | {sd:.1f} | {max(values):.1f} |"
            )
    return lines


def _short_lines(table: pd.DataFrame) -> list[str]:
    """The tools that evaluated fewer than b configurations per input value, on average."""
    if not len(table):
        return []
    used = table.groupby(["tool", "b"], sort=False)["n_evaluated"].mean().reset_index()
    short = used[used["n_evaluated"] < used["b"] - 1e-9]
    if not len(short):
        return []
    return [
        "",
        "Evaluations per input value below b (mean over runs): "
        + ", ".join(
            f"{row['tool']} {row['n_evaluated']:.1f} of {int(row['b'])}"
            for row in short.to_dict("records")
        ),
    ]


def _wall_lines(wall: Mapping[str, float], case_seconds: float) -> list[str]:
    lines = ["", "Wall time per tool (all budgets and seeds of this case), seconds:", ""]
    lines += ["| tool | seconds |", "|---|---|"]
    for tool, seconds in wall.items():
        label = "project (tune + header evaluation)" if tool == "project" else tool
        lines.append(f"| {label} | {seconds:.1f} |")
    lines.append(f"| case total | {case_seconds:.1f} |")
    return lines


def report_case(
    case: Case,
    table: pd.DataFrame,
    wall: Mapping[str, float],
    tune: Mapping[int, list[float]],
    missing: Mapping[str, str],
    args: argparse.Namespace,
    budgets: Sequence[int],
    seeds: Sequence[int],
    tools: Sequence[str],
    case_seconds: float,
    results: Path,
    stem: str,
) -> str:
    """Write ``<stem>_<case>.{md,csv,png}`` under ``results``; return the markdown."""
    order = tool_rows_order(tools)
    summary = summarize_runs(table) if len(table) else pd.DataFrame(columns=["tool", "b"])
    counts = done_when_2_counts(table) if "project" in tools else pd.DataFrame()
    with_header = "project" in tools and len(table) > 0
    lines = _header_lines(case, args, budgets, seeds)
    lines += table_markdown(summary, budgets, order, missing)
    lines += _done_when_2_lines(counts)
    lines += _lead_lines(lead_over_best_peer(table) if with_header else pd.DataFrame(), seeds)
    if with_header:
        lines += lead_per_input_markdown(table)
    lines += _tune_lines(case, tune)
    lines += _short_lines(table)
    lines += _wall_lines(wall, case_seconds)
    text = "\n".join(lines) + "\n"
    results.mkdir(parents=True, exist_ok=True)
    provenance_lines = [  # the markdown's provenance, as the CSV's comment lines
        line.removeprefix("- ").replace("`", "") for line in markdown_lines(args.command_line)
    ]
    (results / f"{stem}_{case.name}.csv").write_text(
        header(provenance_lines)
        + table.to_csv(index=False, float_format="%.6g", lineterminator="\n"),
        encoding="utf-8",
    )
    figure = results / f"{stem}_{case.name}.png"
    title = f"{case.name}: fraction of optimum vs evaluations per input"
    if len(summary) and write_figure(summary, order, figure, title):
        text += f"\nFigure: `{figure.name}`.\n"
    (results / f"{stem}_{case.name}.md").write_text(text, encoding="utf-8")
    return text
