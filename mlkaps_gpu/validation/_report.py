"""``mlkaps-gpu report DIR``: one self-contained HTML page about a campaign.

Sections: the configuration and environment; the samples over time (by origin: sampling, or
the validation / merge run that measured them); the surrogate's accuracy (k-fold
cross-validated MAE and MAPE on the stored successful samples, with the campaign's surrogate
settings); the optimum maps; the tree (mode, depth, leaves, verification, depth sweep, the
header's text in a collapsible block); the validation and merge results when present. Every
figure is an inline base64 PNG, so the file can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import html
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu import __version__

DEFAULT_FOLDS = 5

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .6em 0; font-size: .92em; }
td, th { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
pre { background: #f7f7f7; padding: .8em; overflow-x: auto; font-size: .85em; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .9em; color: #555; }
.note { color: #555; font-size: .92em; }
"""


class _Page:
    """Collects HTML fragments and the figures placed in them."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.figures: list[str] = []

    def add(self, fragment: str) -> None:
        self.parts.append(fragment)

    def heading(self, text: str) -> None:
        self.add(f"<h2>{html.escape(text)}</h2>")

    def paragraph(self, text: str, css: str = "") -> None:
        attribute = f' class="{css}"' if css else ""
        self.add(f"<p{attribute}>{html.escape(text)}</p>")

    def table(self, rows: Mapping[str, Any] | pd.DataFrame) -> None:
        if isinstance(rows, pd.DataFrame):
            self.add(rows.to_html(index=False, border=0, float_format=lambda v: f"{v:.4g}"))
            return
        cells = "".join(
            f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_text(v))}</td></tr>"
            for k, v in rows.items()
        )
        self.add(f"<table>{cells}</table>")

    def figure(self, png: bytes | None, caption: str) -> None:
        if png is None:
            return
        data = base64.b64encode(png).decode("ascii")
        self.figures.append(caption)
        self.add(
            f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )

    def code(self, text: str, summary: str | None = None) -> None:
        block = f"<pre>{html.escape(text)}</pre>"
        if summary is not None:
            block = f"<details><summary>{html.escape(summary)}</summary>{block}</details>"
        self.add(block)

    def render(self, title: str) -> str:
        body = "\n".join(self.parts)
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
            f"<body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
        )


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


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
            log_target=options.log_target,
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
            f"{_text(summary['progressions']['mean_speedup'])}"
        ),
        "regressions: share / mean slowdown": (
            f"{100 * summary['regressions']['share']:.1f}% / "
            f"{_text(summary['regressions']['mean_slowdown'])}"
        ),
        "worst point (differing configurations)": (
            f"{_text(worst.get('speedup'))}x at {_text(worst.get('inputs'))} "
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
        "load average (start, end)": _text(summary.get("load_average")),
        "noise threshold (median / p90 over points)": (
            f"+-{100 * summary.get('noise_threshold', 0.0):.2f}% / "
            f"+-{100 * summary.get('noise_threshold_p90', 0.0):.1f}%"
        ),
        "decision rule": summary.get("test"),
        "noise measured as": summary.get("noise_method"),
        "run": summary.get("run"),
    }


def build_report(directory: str | Path, *, folds: int = DEFAULT_FOLDS) -> tuple[str, list[str]]:
    """The HTML text and the captions of its figures."""
    from mlkaps_gpu import analysis
    from mlkaps_gpu.campaign import Campaign

    campaign = Campaign.open(directory)
    folder = campaign.directory
    page = _Page()
    meta = campaign.meta
    page.paragraph(
        f"Campaign directory {folder.resolve()}; report written "
        f"{time.strftime('%Y-%m-%d %H:%M:%S')} by mlkaps_gpu {__version__}.",
        "note",
    )

    page.heading("Configuration")
    environment = campaign.environment
    page.table(
        {
            "name": campaign.config.name,
            "seed": campaign.config.seed,
            "stages done": ", ".join(meta.get("stages", [])) or "none",
            "inputs": ", ".join(campaign.space.input_names),
            "design": ", ".join(campaign.space.design_names),
            "constraints": "; ".join(c.source for c in campaign.space.constraints) or "none",
            "objectives": json.dumps(campaign.config.objectives),
            "measured on": _environment_line(environment),
        }
    )
    for difference in campaign.environment_warnings():
        page.paragraph(f"This machine differs from the measuring one: {difference}", "note")
    page.code(campaign.config.text, "config.toml")
    details = meta.get("details", {})
    if details:
        page.code(json.dumps(details, indent=2, sort_keys=True), "stage details (campaign.json)")

    page.heading("Samples over time")
    table = campaign.store.load()
    objective = campaign.setup.objectives[0]
    if len(table):
        origins = sample_origins(table)
        counts = pd.crosstab(origins.rename("origin"), table["status"].rename(None))
        counts = counts.reset_index()
        counts.columns = [str(c) for c in counts.columns]
        page.table(counts)
        page.figure(
            analysis.samples_over_time(table, objective, origins),
            "Objective of every stored sample in store order (left) and samples stored over "
            "wall time (right), by origin",
        )
    else:
        page.paragraph("No samples stored yet.")

    page.heading("Surrogate accuracy")
    accuracy = cross_validated_accuracy(campaign, folds=folds) if len(table) else None
    if accuracy is None:
        page.paragraph(f"Too few successful samples for {folds}-fold cross-validation.")
    else:
        metrics, measured, predicted = accuracy
        page.table(metrics)
        page.figure(
            analysis.predicted_vs_measured(measured, predicted, objective),
            f"Out-of-fold predictions ({folds}-fold, the campaign's surrogate settings) against "
            "the measurements",
        )

    page.heading("Optimum maps")
    if (folder / "optima.csv").exists():
        optima = campaign.load_optima()
        page.paragraph(
            f"{len(optima)} grid points; source of the choice: "
            + _text(optima["source"].value_counts().to_dict())
            if "source" in optima
            else f"{len(optima)} grid points."
        )
        page.figure(
            analysis.optimum_maps(optima, campaign.space),
            "Optimal value of each design parameter over the optimization grid",
        )
    else:
        page.paragraph("No optima yet (the optimization stage has not run).")

    page.heading("Decision tree")
    verification_path = folder / "verification.json"
    if verification_path.exists():
        verification = json.loads(verification_path.read_text())
        page.table({k: v for k, v in verification.items() if k != "depth_sweep"})
        page.figure(
            analysis.depth_sweep(verification.get("depth_sweep", []), verification.get("depth")),
            "Predicted regret and tree size against the depth limit (vertical line: chosen)",
        )
    if campaign.header_path.exists():
        text = campaign.header_path.read_text(encoding="utf-8")
        page.code(text, f"{campaign.header_path.name} ({len(text.splitlines())} lines)")
    else:
        page.paragraph("No header yet (the trees stage has not run).")

    validation = folder / "validation" / "summary.json"
    if validation.exists():
        page.heading("Validation")
        summary = json.loads(validation.read_text())
        page.table(_validation_rows(summary))
        for path in _png_files(validation.parent):
            page.figure(path.read_bytes(), f"validation: {path.stem.replace('_', ' ')}")

    merge = folder / "merge" / "summary.json"
    if merge.exists():
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
                    "before merge": [_text(v) for v in before.values()],
                    "after merge": [_text(after[k]) for k in before],
                }
            )
        )
        for label in ("before", "after"):
            for path in _png_files(merge.parent / label):
                page.figure(path.read_bytes(), f"merge, {label}: {path.stem.replace('_', ' ')}")
        merged_header = folder / str(summary.get("header", ""))
        if merged_header.is_file():
            text = merged_header.read_text(encoding="utf-8")
            page.code(text, f"{merged_header.name} ({len(text.splitlines())} lines)")
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
    directory: str | Path, out: str | Path | None = None, *, folds: int = DEFAULT_FOLDS
) -> Path:
    """Write the report (default ``DIR/report.html``); returns its path."""
    text, _ = build_report(directory, folds=folds)
    path = Path(out) if out is not None else Path(directory) / "report.html"
    path.write_text(text, encoding="utf-8")
    return path
