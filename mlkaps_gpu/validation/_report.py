"""``mlkaps-gpu report DIR``: one self-contained HTML page about a campaign.

Sections, the answer first: what the header ships per input value, what it gains (the fraction
of the best known, the speed-up over a default or expert where one is given) and how sure it is
(how many answers were measured); the search (best-so-far, parameter importance, the samples
over the space); then the configuration and environment; the samples over time (by origin:
sampling, or the validation / merge run that measured them); the surrogate's accuracy (k-fold
cross-validated MAE and MAPE on the stored successful samples, with the campaign's surrogate
settings); the optimum maps; the tree (mode, depth, leaves, verification, depth sweep, the
header's answers against the best measured configuration per grid point, the header's text in a
collapsible block); the validation and merge results when present. Every figure is an inline
base64 PNG, so the file can be mailed or archived alone; the raw files are linked for machines.

The page model and the formatting of values (never JSON in a table) are in ``_report_page``;
the first two sections in ``_report_shipped`` and ``_report_search``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu import __version__
from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.validation._expert import Reference, expert_reference, resolve_reference
from mlkaps_gpu.validation._report_page import _Page, duration, percent, readable
from mlkaps_gpu.validation._report_search import search_section
from mlkaps_gpu.validation._report_shipped import objective_unit, shipped_section

DEFAULT_FOLDS = 5
#: Rows of the measured-regret table shown (worst first).
_REGRET_ROWS = 40


def sample_origins(table: pd.DataFrame) -> pd.Series:
    """``sampling`` or the purpose of the run that stored the sample (``validate``,
    ``merge-before``, ``merge-after``), read from the ``origin=`` mark of the message."""
    message = table["message"].fillna("").astype(str)
    origin = message.str.extract(r"origin=([^@\s]+)@", expand=False)
    return origin.fillna("sampling")


def cross_validated_accuracy(
    campaign: Any, *, folds: int = DEFAULT_FOLDS
) -> tuple[dict[str, Any], np.ndarray, np.ndarray] | None:
    """Out-of-fold MAE / MAPE of the campaign's surrogate on its stored successful samples
    (None with fewer than ``2 * folds`` samples)."""
    from sklearn.model_selection import KFold

    from mlkaps_gpu.surrogate import LightGBMSurrogate

    samples = campaign.store.valid_samples()
    objective = campaign.setup.objectives[0]
    if len(samples) < 2 * folds:
        return None
    space = campaign.space
    features = space.features(samples)
    target = samples[objective].to_numpy(dtype=np.float64)
    predicted = np.empty(len(samples))
    options = campaign.config.surrogate
    splitter = KFold(n_splits=folds, shuffle=True, random_state=campaign.config.seed)
    for train, test in splitter.split(features):
        model = LightGBMSurrogate(
            categorical_features=space.categorical_features,
            n_estimators=options.n_estimators,
            log_target=options.log_target and bool(np.all(target > 0)),
            seed=campaign.config.seed,
            params=options.params,
        ).fit(features[train], target[train])
        predicted[test] = model.predict(features[test])
    error = np.abs(predicted - target)
    relative = error / np.where(target != 0, np.abs(target), np.nan)
    metrics = {
        "samples": len(samples),
        "folds": folds,
        "MAE": float(np.mean(error)),
        "MAPE (%)": float(100 * np.nanmean(relative)),
        "median APE (%)": float(100 * np.nanmedian(relative)),
        "objective": objective,
    }
    return metrics, target, predicted


def _png_files(folder: Path) -> list[Path]:
    order = {"speedup_map.png": 0, "speedup_histogram.png": 1}
    return sorted(folder.glob("*.png"), key=lambda p: (order.get(p.name, 9), p.name))


def _validation_rows(summary: Mapping[str, Any]) -> dict[str, Any]:
    worst = summary.get("worst") or {}
    return {
        "tuned vs reference": f"{summary.get('tuned')} vs {summary.get('reference')}",
        "points compared (failed)": f"{summary.get('compared')} ({summary.get('failed')})",
        "repeats per configuration": summary.get("repeats"),
        "geometric-mean speedup": summary.get("geomean_speedup"),
        "progressions: share / mean speedup": (
            f"{100 * summary['progressions']['share']:.1f}% / "
            f"{readable(summary['progressions']['mean_speedup'])}"
        ),
        "regressions: share / mean slowdown": (
            f"{100 * summary['regressions']['share']:.1f}% / "
            f"{readable(summary['regressions']['mean_slowdown'])}"
        ),
        "worst point (differing configurations)": (
            f"{readable(worst.get('speedup'))}x at {readable(worst.get('inputs'))} "
            f"({worst.get('verdict')})"
            if worst
            else "- (every point has the reference's configuration)"
        ),
        "same configuration (A/A) points / their spread (p95)": (
            f"{summary.get('same_configuration', 0)} / "
            + (
                f"+-{100 * summary['same_configuration_spread']['p95']:.1f}%"
                if summary.get("same_configuration_spread")
                else "-"
            )
        ),
        "load average (start, end)": readable(summary.get("load_average")),
        "noise threshold (median / p90 over points)": (
            f"+-{100 * summary.get('noise_threshold', 0.0):.2f}% / "
            f"+-{100 * summary.get('noise_threshold_p90', 0.0):.1f}%"
        ),
        "decision rule": summary.get("test"),
        "noise measured as": summary.get("noise_method"),
        "run": summary.get("run"),
    }


def _configuration_section(page: _Page, campaign: Campaign) -> None:
    """The configuration, where it was measured, config.toml and the stage details."""
    page.heading("Configuration")
    meta = campaign.meta
    page.table(
        {
            "name": campaign.config.name,
            "seed": campaign.config.seed,
            "stages done": ", ".join(meta.get("stages", [])) or "none",
            "inputs": ", ".join(campaign.space.input_names),
            "design": ", ".join(campaign.space.design_names),
            "constraints": "; ".join(c.source for c in campaign.space.constraints) or "none",
            "objectives": ", ".join(f"{k} ({v})" for k, v in campaign.config.objectives.items()),
            "measured on": _environment_line(campaign.environment),
        }
    )
    for difference in campaign.environment_warnings():
        page.paragraph(f"This machine differs from the measuring one: {difference}", "note")
    page.code(campaign.config.text, "config.toml")
    details = meta.get("details", {})
    if details:
        page.code(
            json.dumps(details, indent=2, sort_keys=True), "raw stage details (campaign.json)"
        )


def _samples_section(page: _Page, campaign: Campaign, table: pd.DataFrame) -> None:
    """Counts of the stored samples by origin and status, and the samples over time."""
    from mlkaps_gpu import analysis

    page.heading("Samples over time")
    if not len(table):
        page.paragraph("No samples stored yet.")
        return
    origins = sample_origins(table)
    counts = pd.crosstab(origins.rename("origin"), table["status"].rename(None))
    counts = counts.reset_index()
    counts.columns = [str(c) for c in counts.columns]
    page.table(counts)
    replay = bool(campaign.environment.get("replay"))
    page.figure(
        analysis.samples_over_time(
            table, campaign.setup.objectives[0], origins, wall_time=not replay
        ),
        "Objective of every stored sample in store order, by origin"
        + (
            " (a replay answers at once: no wall time)"
            if replay
            else "; samples stored over wall time (right)"
        ),
    )


def _load_paragraph(page: _Page, campaign: Campaign) -> None:
    """What the machine's load recorded with the batches says (nothing for a replay, or where
    none was recorded)."""
    from mlkaps_gpu.campaign import campaign_interference

    record = campaign_interference(campaign)
    if record is None:
        return
    loads = campaign.store.batch_loads()["other_cores"]
    page.paragraph(
        f"Other processes' CPU use while the {len(loads)} batches measured in this process ran:"
        f" median {loads.median():.2f}, max {loads.max():.2f} cores; a measurement counts as "
        f"disturbed from {record['threshold_cores']} cores while no core was left idle.",
        "note",
    )
    if not record["sustained"]:
        return
    text = (
        f"{record['disturbed']} of {record['measurements']} measurements "
        f"({100 * record['share']:.0f} %) were taken while other processes kept the machine "
        f"busy (median {record['median_other_cores']:.2f} cores over those batches): they "
        "measure a loaded machine."
    )
    if record.get("answers_on_disturbed"):
        points = "; ".join(
            ", ".join(f"{k}={readable(v)}" for k, v in point.items()) for point in record["points"]
        )
        text += (
            f" {record['answers_on_disturbed']} of {record['answers']} grid points' answers rest "
            f"only on them: {points}."
        )
    page.paragraph(text, "warning")


def _accuracy_section(page: _Page, campaign: Campaign, table: pd.DataFrame, folds: int) -> None:
    """The surrogate's cross-validated errors and its out-of-fold predictions."""
    from mlkaps_gpu import analysis

    page.heading("Surrogate accuracy")
    accuracy = cross_validated_accuracy(campaign, folds=folds) if len(table) else None
    if accuracy is None:
        page.paragraph(f"Too few successful samples for {folds}-fold cross-validation.")
        return
    metrics, measured, predicted = accuracy
    unit = objective_unit(campaign)
    page.table({**metrics, "MAE": duration(metrics["MAE"], unit) if unit else metrics["MAE"]})
    page.figure(
        analysis.predicted_vs_measured(measured, predicted, campaign.setup.objectives[0]),
        f"Out-of-fold predictions ({folds}-fold, the campaign's surrogate settings) against "
        "the measurements",
    )


def _optima_section(page: _Page, campaign: Campaign) -> None:
    """The grid's optima: where each choice came from, and their maps."""
    from mlkaps_gpu import analysis

    page.heading("Optimum maps")
    if not (campaign.directory / "optima.csv").exists():
        page.paragraph("No optima yet (the optimization stage has not run).")
        return
    optima = campaign.load_optima()
    text = f"{len(optima)} grid points."
    if "source" in optima:
        counts = optima["source"].value_counts()
        sources = {"measured": "decided from measurements", "surrogate": "from the model"}
        text = (
            f"{len(optima)} grid points; the decisions: "
            + ", ".join(
                f"{count} {sources.get(str(source), str(source))}"
                for source, count in counts.items()
            )
            + "."
        )
    page.paragraph(text)
    page.figure(
        analysis.optimum_maps(optima, campaign.space),
        "Optimal value of each design parameter over the optimization grid",
    )


def _tree_section(page: _Page, campaign: Campaign) -> None:
    """The tree's verification and depth sweep, and the header's text."""
    from mlkaps_gpu import analysis

    page.heading("Decision tree")
    verification_path = campaign.directory / "verification.json"
    verification = json.loads(verification_path.read_text()) if verification_path.exists() else None
    if verification is not None:
        page.table(_verification_rows(verification))
        trees = campaign.config.trees
        rule = (
            "the smallest depth whose predicted mean regret is within "
            f"{100 * trees.depth_tolerance:g} percentage points of the best depth's"
            if trees.max_depth == "auto"
            else f"[trees] max_depth = {trees.max_depth}"
        )
        page.figure(
            analysis.depth_sweep(verification.get("depth_sweep", []), verification.get("depth")),
            "Tree depth sweep: the regret the surrogate predicts on the grid (mean, p90), the "
            "largest regret measured at grid points where the answer and the best were both "
            f"measured, and the leaves, against the depth limit; vertical line: the chosen depth "
            f"({rule})",
        )
    if campaign.header_path.exists():
        _header_code(page, campaign.header_path)
    else:
        page.paragraph("No header yet (the trees stage has not run).")
    if verification is not None:
        _measured_regret(page, verification, campaign.setup.objectives[0], objective_unit(campaign))


#: verification.json keys shown elsewhere (the sweep's figure, the measured regret's section).
_SHOWN_ELSEWHERE = ("depth_sweep", "per_point", "measured_regret")


def _verification_rows(verification: Mapping[str, Any]) -> dict[str, str]:
    """verification.json as sentences: the tree, the header's check, the confirmation and the
    regret against the best known (other keys as readable text)."""
    rows: dict[str, str] = {}
    leaves = verification.get("leaves")
    count = sum(leaves.values()) if isinstance(leaves, Mapping) else leaves
    rows["tree"] = (
        f"{verification.get('mode', '?')} mode, depth {verification.get('depth', '?')}, "
        f"{readable(count)} leaves"
    )
    rows["header"] = (
        f"{verification.get('header', '?')}: compared with the trees on "
        f"{readable(verification.get('verified_inputs'))} inputs, "
        f"{readable(verification.get('mismatches'))} mismatches"
    )
    confirmation = verification.get("confirmation")
    if isinstance(confirmation, Mapping):
        rows["confirmation by measurement"] = (
            f"{confirmation.get('rounds', 0)} rounds: {confirmation.get('measured_answers', 0)} "
            f"answers, {confirmation.get('remeasured_answers', 0)} answers again and "
            f"{confirmation.get('measured_neighbours', 0)} neighbours measured; "
            f"{confirmation.get('unconfirmed_answers', 0)} answers left unmeasured, "
            f"{confirmation.get('measured_instead', 0)} replaced by a configuration measured there"
        )
    regret = verification.get("regret_against_best_known")
    if isinstance(regret, Mapping) and regret.get("points"):
        rows["against the best known"] = (
            f"geometric-mean fraction {regret.get('geomean_fraction', float('nan')):.3f} over "
            f"{regret['points']} grid points; {regret.get('above_1_percent', 0)} more than 1 % "
            f"slower (the most {percent(regret.get('max'))}), "
            f"{regret.get('slower_than_1_5x', 0)} more than 1.5x slower"
        )
    done = {"leaves", "mode", "depth", "header", "verified_inputs", "mismatches"}
    done |= {"confirmation", "regret_against_best_known", *_SHOWN_ELSEWHERE}
    for key, value in verification.items():
        if key not in done:
            rows[key.replace("_", " ")] = readable(value)
    return rows


def measured_regret_table(per_point: list[Mapping[str, Any]], objective: str) -> pd.DataFrame:
    """Per grid point of ``verification.json``'s ``per_point``: its inputs, the header's answer
    as measured, the best measured configuration there and the measured regret in per cent
    (how much worse the answer measured, relative to the best), worst first."""
    table = pd.DataFrame(per_point)
    if table.empty:
        return table
    header, best = f"header_measured_{objective}", f"best_measured_{objective}"
    inputs = [c for c in table.columns if c not in (header, best, "header_measured_regret")]
    frame = table[inputs].copy()
    frame[f"header's answer: {objective}"] = table.get(header)
    frame[f"best measured: {objective}"] = table.get(best)
    regret = pd.to_numeric(table.get("header_measured_regret"), errors="coerce")
    frame["measured regret (%)"] = 100 * regret
    ordered = frame.sort_values("measured regret (%)", ascending=False, kind="stable")
    return ordered.reset_index(drop=True)


def _measured_regret(
    page: _Page, verification: Mapping[str, Any], objective: str, unit: str | None = None
) -> None:
    """The header's answers against the best measured configurations, per grid point (times
    in ``unit``, see :func:`objective_unit`)."""
    summary = verification.get("measured_regret")
    if not summary:
        return
    page.heading("The header's answers against the best measured")
    page.paragraph(
        f"At {summary.get('known')} of {summary.get('points')} grid points both the header's "
        "answer and the best configuration there were measured; at "
        f"{summary.get('above_1_percent')} of them the answer measured more than 1 % worse "
        f"(mean measured regret {percent(summary.get('mean'), 2)}, max "
        f"{percent(summary.get('max'), 2)}). "
        "Measured regret: how much worse the header's answer measured than the best "
        "configuration measured at the same point, relative to it."
    )
    if summary.get("failed"):
        page.paragraph(
            f"At {summary.get('failed')} grid point(s) the header's answer failed every time "
            "it ran there (no configuration of those points ran successfully, or none other "
            "was a candidate): see optima.csv, column header_failed.",
            "warning",
        )
    per_point = verification.get("per_point") or []
    if not per_point:
        page.paragraph("The values of every point are in optima.csv.", "note")
        return
    table = measured_regret_table(per_point, objective)
    if len(table) > _REGRET_ROWS:
        page.paragraph(f"The {_REGRET_ROWS} worst of {len(table)} points:", "note")
    shown = table.head(_REGRET_ROWS).copy()
    for column in (f"header's answer: {objective}", f"best measured: {objective}"):
        shown[column] = [duration(value, unit) for value in shown[column]]
    shown["measured regret (%)"] = [f"{value:.2f}" for value in shown["measured regret (%)"]]
    page.table(shown, name="measured_regret")


def _header_code(page: _Page, path: Path) -> None:
    """A header's text in a collapsible block titled with its name and line count."""
    text = path.read_text(encoding="utf-8")
    page.code(text, f"{path.name} ({len(text.splitlines())} lines)")


def _validation_section(page: _Page, folder: Path) -> None:
    """The validation run's summary and figures, when there is one."""
    validation = folder / "validation" / "summary.json"
    if not validation.exists():
        return
    page.heading("Validation")
    summary = json.loads(validation.read_text())
    page.table(_validation_rows(summary))
    for path in _png_files(validation.parent):
        page.figure(path.read_bytes(), f"validation: {path.stem.replace('_', ' ')}")


def _merge_section(page: _Page, folder: Path) -> None:
    """The merge with the expert, when there is one: what was kept, the validation before and
    after side by side, their figures and the merged header."""
    merge = folder / "merge" / "summary.json"
    if not merge.exists():
        return
    page.heading("Merge with the expert")
    summary = json.loads(merge.read_text())
    page.table(
        {
            "expert": summary.get("expert"),
            "kept tuned / expert": f"{summary['kept_tuned']} / {summary['kept_expert']}",
            "merged header": summary.get("header"),
            "tree": {k: v for k, v in summary.get("tree", {}).items() if k != "depth_sweep"},
            "tree agrees with the decisions": f"{100 * summary['tree_agreement']:.1f}%",
            "verification": summary.get("verification"),
        }
    )
    before, after = (_validation_rows(summary[label]) for label in ("before", "after"))
    page.table(
        pd.DataFrame(
            {
                "measure": list(before),
                "before merge": [readable(v) for v in before.values()],
                "after merge": [readable(after[k]) for k in before],
            }
        )
    )
    for label in ("before", "after"):
        for path in _png_files(merge.parent / label):
            page.figure(path.read_bytes(), f"merge, {label}: {path.stem.replace('_', ' ')}")
    merged_header = folder / str(summary.get("header", ""))
    if merged_header.is_file():
        _header_code(page, merged_header)


def report_reference(campaign: Campaign, reference: str | Reference | None) -> Reference | None:
    """The configuration the first section measures the speed-up against: ``reference`` (as
    ``validate --reference`` takes it) when given, else the kernel's expert default where it
    has one, else none."""
    if isinstance(reference, Reference):
        return reference
    if reference is not None:
        return resolve_reference(reference, campaign)
    return expert_reference(campaign) if campaign.setup.expert else None


def _raw_links(page: _Page, campaign: Campaign, report_folder: Path) -> None:
    """Links to the campaign's raw files (relative to where the report is written)."""
    names = ["optima.csv", "verification.json", "campaign.json", "samples.sqlite", "config.toml"]
    names += [f"models/{objective}.txt" for objective in campaign.setup.objectives]
    names.append(campaign.header_path.name)
    targets = [
        (name, Path(os.path.relpath(campaign.directory / name, report_folder)).as_posix())
        for name in names
        if (campaign.directory / name).is_file()
    ]
    page.links("Raw files, for machines:", targets)


def build_report(
    directory: str | Path,
    *,
    folds: int = DEFAULT_FOLDS,
    reference: str | Reference | None = None,
    report_folder: str | Path | None = None,
) -> tuple[str, list[str]]:
    """The HTML text and the captions of its figures.

    Args:
        directory: the campaign directory.
        folds: cross-validation folds of the surrogate's accuracy.
        reference: what the speed-ups are measured against (see :func:`report_reference`).
        report_folder: where the page will be written (its links to the raw files are
            relative to it); default: the campaign directory.
    """
    campaign = Campaign.open(directory)
    folder = campaign.directory
    page = _Page()
    page.paragraph(
        f"Campaign directory {folder.resolve()}; report written "
        f"{time.strftime('%Y-%m-%d %H:%M:%S')} by mlkaps_gpu {__version__}.",
        "note",
    )
    _raw_links(page, campaign, Path(report_folder) if report_folder is not None else folder)
    verification_path = folder / "verification.json"
    verification = json.loads(verification_path.read_text()) if verification_path.exists() else None
    shipped_section(page, campaign, verification, report_reference(campaign, reference))
    table = campaign.store.load()
    search_section(page, campaign, table)
    _configuration_section(page, campaign)
    _samples_section(page, campaign, table)
    _load_paragraph(page, campaign)
    _accuracy_section(page, campaign, table, folds)
    _optima_section(page, campaign)
    _tree_section(page, campaign)
    _validation_section(page, folder)
    _merge_section(page, folder)
    campaign.setup.executor.close()
    return page.render(f"mlkaps-gpu campaign report: {campaign.config.name}"), page.figures


def _environment_line(environment: Mapping[str, Any]) -> str:
    if not environment:
        return "not recorded"
    if environment.get("replay"):
        return "replayed data"
    from mlkaps_gpu.campaign import summary_line

    return summary_line(dict(environment))


def write_report(
    directory: str | Path,
    out: str | Path | None = None,
    *,
    folds: int = DEFAULT_FOLDS,
    reference: str | Reference | None = None,
) -> Path:
    """Write the report (default ``DIR/report.html``); returns its path. ``reference``: what
    the speed-ups are measured against (see :func:`report_reference`)."""
    path = Path(out) if out is not None else Path(directory) / "report.html"
    text, _ = build_report(
        directory, folds=folds, reference=reference, report_folder=path.resolve().parent
    )
    path.write_text(text, encoding="utf-8")
    return path
