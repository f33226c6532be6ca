"""The report's first section: what the header ships, what it gains, how sure it is.

Per input value of the optimization grid: the configuration the header answers (its
parameters), its time (measured at that input value, else the estimate the campaign scored it
with), the fraction of the best configuration known there (``optima.csv``: ``header_regret``
against ``best_known_<objective>`` and ``best_measured_<objective>``) and, with a reference (an
expert default or a fixed configuration), the speed-up over it; how many answers were measured
(``verification.json``: ``confirmation``). Many input values are summarised by the distinct
configurations shipped and their share, the per-point table is cut to its worst rows, and the
whole table is a CSV download.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.validation._expert import Reference
from mlkaps_gpu.validation._report_page import (
    _Page,
    csv_data_uri,
    duration,
    number,
    percent,
    readable,
)

#: Rows of the per-point table shown in the page (all of them are in the CSV download).
SHIPPED_ROWS = 60
#: Rows of the configurations table shown (the most shipped ones).
SHARE_ROWS = 30
#: More design parameters than this: the configurations table is transposed and the per-point
#: table holds a configuration's parameters in one cell.
WIDE_DESIGN = 5


def objective_unit(campaign: Campaign) -> str | None:
    """The unit of the primary objective where the campaign's kernel fixes it: seconds for a
    Python function the executor times, milliseconds for Kernel Tuner caches; None otherwise."""
    if campaign.setup.objectives[0] != "time":
        return None
    kernel = tomllib.loads(campaign.config.text).get("kernel", {})
    executor = kernel.get("executor")
    if executor == "python" and kernel.get("measure"):
        return "s"
    if executor == "replay" and kernel.get("format", "kernel_tuner") in ("kernel_tuner", "t4"):
        return "ms"
    return None


def _configuration_times(
    campaign: Campaign, table: pd.DataFrame, objective: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``table`` (inputs and a configuration): its mean measured objective where it
    was measured successfully at those inputs, else the surrogate's prediction
    (``models/<objective>.txt``); and whether it was measured. NaN where the configuration is
    not valid there."""
    space = campaign.space
    samples = campaign.store.valid_samples()
    means: dict[tuple[Any, ...], float] = {}
    if len(samples):
        grouped = samples.assign(_key=space.key(samples)).groupby("_key")[objective].mean()
        means = grouped.to_dict()
    keys = space.key(table[space.names])
    measured = np.array([key in means for key in keys])
    values = np.array([means.get(key, np.nan) for key in keys], dtype=np.float64)
    if (~measured).any():
        model = campaign.load_models()[campaign.setup.objectives.index(objective)]
        values[~measured] = model.predict(space.features(table.loc[~measured, space.names]))
    valid = space.is_valid(table[space.names])
    return np.where(valid, values, np.nan), measured & valid


def shipped_points(
    campaign: Campaign, optima: pd.DataFrame, reference: Reference | None
) -> pd.DataFrame:
    """One row per grid point: the inputs, the header's configuration (``configuration``:
    ``C1``, ``C2``... by how many points ship it), ``time`` and ``measured`` (the header's
    answer measured there, else the campaign's estimate of it), ``best_known`` and
    ``fraction`` (of the best known), and with a reference, ``reference_time``,
    ``reference_measured`` and ``speedup``."""
    space = campaign.space
    objective = campaign.setup.objectives[0]
    maximize = campaign.setup.directions[0] == "maximize"
    inputs = optima[space.input_names].reset_index(drop=True)
    answers = campaign.load_selector().select(inputs).reset_index(drop=True)
    out = pd.concat([inputs, answers[space.design_names]], axis=1)
    design_keys = out[space.design_names].astype(str).agg(" ".join, axis=1)
    # the most shipped first; ties in the order the grid meets them
    counts = design_keys.value_counts(sort=False).sort_values(ascending=False, kind="stable")
    names = {key: f"C{index + 1}" for index, key in enumerate(counts.index)}
    out.insert(len(space.input_names), "configuration", design_keys.map(names))
    regret = pd.to_numeric(optima["header_regret"], errors="coerce").to_numpy(dtype=np.float64)
    best_measured = optima[f"best_measured_{objective}"].to_numpy(dtype=np.float64)
    best_known = optima[f"best_known_{objective}"].to_numpy(dtype=np.float64)
    # the reference of header_regret: the better of the best measured and the best estimate
    best = np.fmax(best_measured, best_known) if maximize else np.fmin(best_measured, best_known)
    header = optima[f"header_measured_{objective}"].to_numpy(dtype=np.float64)
    measured = np.isfinite(header)
    implied = best * (1.0 - regret) if maximize else best * (1.0 + regret)
    out["time"] = np.where(measured, header, implied)
    out["measured"] = measured
    out["best_known"] = best
    out["fraction"] = (1.0 - regret) if maximize else 1.0 / (1.0 + regret)
    if reference is not None:
        configurations = reference.configurations(inputs)
        table = pd.concat([inputs, configurations], axis=1)
        times, found = _configuration_times(campaign, table, objective)
        out["reference_time"] = times
        out["reference_measured"] = found
        with np.errstate(divide="ignore", invalid="ignore"):
            out["speedup"] = out["time"] / times if maximize else times / out["time"]
    return out


def configuration_shares(points: pd.DataFrame, design: list[str]) -> pd.DataFrame:
    """The distinct configurations shipped: their parameters, how many input values ship each
    and the share, and the geometric-mean fraction of the best known over those values."""
    fraction = np.log(points["fraction"].clip(lower=1e-12))
    frame = points.assign(_log_fraction=fraction)
    grouped = frame.groupby("configuration", sort=False)
    table = grouped[design].first()
    table["input values"] = grouped.size()
    table["share"] = [percent(n / len(points)) for n in table["input values"]]
    table["fraction of the best known (geomean)"] = [
        f"{value:.3f}" for value in np.exp(grouped["_log_fraction"].mean())
    ]
    table = table.reset_index()
    order = table["configuration"].str[1:].astype(int).argsort(kind="stable")
    return table.iloc[order].reset_index(drop=True)


def _transposed(table: pd.DataFrame) -> pd.DataFrame:
    """One column per configuration, one row per parameter (for many design parameters)."""
    body = table.set_index("configuration").T.reset_index(names="")
    body.columns = [str(c) for c in body.columns]
    return body


def _points_frame(
    points: pd.DataFrame, inputs: list[str], design: list[str], unit: str | None, label: str
) -> pd.DataFrame:
    """The per-point table as the page shows it (times with units, fractions rounded)."""
    frame = points[[*inputs, "configuration"]].copy()
    if len(design) <= WIDE_DESIGN:
        for name in design:
            frame[name] = points[name]
    else:  # one cell, so that the times stay on the screen
        frame["parameters"] = [
            ", ".join(f"{n}={readable(v)}" for n, v in zip(design, row, strict=True))
            for row in points[design].itertuples(index=False)
        ]
    frame["time"] = [duration(v, unit) for v in points["time"]]
    frame["time from"] = np.where(points["measured"], "measurement", "model")
    frame["best known"] = [duration(v, unit) for v in points["best_known"]]
    frame["fraction of the best known"] = [
        f"{v:.3f}" if np.isfinite(v) else "-" for v in points["fraction"]
    ]
    if "speedup" in points:
        frame[f"{label}: time"] = [duration(v, unit) for v in points["reference_time"]]
        frame[f"{label}: time from"] = np.where(
            np.isfinite(points["reference_time"]),
            np.where(points["reference_measured"], "measurement", "model"),
            "not valid here",
        )
        frame[f"speed-up over {label}"] = [
            f"{v:.2f}x" if np.isfinite(v) else "-" for v in points["speedup"]
        ]
    return frame


def _geomean(values: np.ndarray) -> float:
    values = values[np.isfinite(values) & (values > 0)]
    return float(np.exp(np.mean(np.log(values)))) if len(values) else float("nan")


def _lead(
    points: pd.DataFrame,
    campaign: Campaign,
    verification: Mapping[str, Any],
    reference: Reference | None,
) -> list[str]:
    """The first paragraphs: how many configurations ship, what they gain, how sure it is."""
    inputs = campaign.space.input_names
    fraction = points["fraction"].to_numpy(dtype=float)
    worst = int(np.nanargmin(fraction)) if np.isfinite(fraction).any() else 0
    where = ", ".join(f"{n}={readable(points[n].iloc[worst])}" for n in inputs)
    count = points["configuration"].nunique()
    lines = [
        f"The header {campaign.header_path.name} ships {count} distinct configuration"
        f"{'s' if count != 1 else ''} over the {len(points)} input values of the grid. Against "
        f"the best configuration known at each value (measured, else modelled), its answers "
        f"reach a geometric mean of {_geomean(fraction):.3f} of the best; "
        f"{int(np.sum(fraction >= 0.99))} of {len(points)} are within 1 %, the lowest is "
        f"{fraction[worst]:.3f} at {where}."
    ]
    measured = int(points["measured"].sum())
    sure = (
        f"How sure: {measured} of {len(points)} answers were measured at their input value "
        "(the others are the model's estimate)"
    )
    confirmation = verification.get("confirmation")
    if isinstance(confirmation, Mapping):
        sure += (
            f"; the confirmation rounds ({confirmation.get('rounds', 0)}) measured "
            f"{confirmation.get('measured_answers', 0)} answers, "
            f"{confirmation.get('remeasured_answers', 0)} answers again and "
            f"{confirmation.get('measured_neighbours', 0)} neighbours, "
            f"{confirmation.get('unconfirmed_answers', 0)} answers were left unmeasured and "
            f"{confirmation.get('measured_instead', 0)} replaced by a configuration measured "
            "there"
        )
    lines.append(sure + ".")
    if reference is not None and "speedup" in points:
        speedup = points["speedup"].to_numpy(dtype=float)
        finite = speedup[np.isfinite(speedup)]
        if len(finite):
            lines.append(
                f"Speed-up over {_reference_name(reference)}: geometric mean "
                f"{_geomean(finite):.2f}x (from {finite.min():.2f}x to {finite.max():.2f}x); "
                f"the reference was measured at {int(points['reference_measured'].sum())} of "
                f"{len(points)} input values and modelled at the others."
            )
    else:
        lines.append(
            "No default or expert to compare with: the kernel has none. mlkaps-gpu report DIR "
            "--reference name=value,... (or a CSV table, a module:function) adds the speed-up "
            "over it."
        )
    return lines


def _reference_name(reference: Reference) -> str:
    if reference.kind == "expert":
        return "the expert default"
    return f"the reference ({reference.label})"


def shipped_section(
    page: _Page,
    campaign: Campaign,
    verification: Mapping[str, Any] | None,
    reference: Reference | None,
) -> None:
    """The report's first section (nothing but a note before the trees stage has run)."""
    from mlkaps_gpu import analysis

    page.heading("What ships, what it gains, how sure it is")
    folder = campaign.directory
    ready = (folder / "optima.csv").is_file() and (folder / "selector.json").is_file()
    if verification is None or not ready:
        page.paragraph("No header yet (the trees stage has not run).")
        return
    optima = campaign.load_optima()
    if "header_regret" not in optima:
        page.paragraph("optima.csv has no header columns (the trees stage has not run).")
        return
    points = shipped_points(campaign, optima, reference)
    for index, line in enumerate(_lead(points, campaign, verification, reference)):
        page.paragraph(line, "lead" if index == 0 else "")
    space = campaign.space
    inputs, design = space.input_names, space.design_names
    shares = configuration_shares(points, design)
    if len(shares) > SHARE_ROWS:
        rest = shares.iloc[SHARE_ROWS:]["input values"].sum()
        page.paragraph(
            f"The {SHARE_ROWS} most shipped of {len(shares)} configurations; the other "
            f"{len(shares) - SHARE_ROWS} ship at {rest} input values (in the CSV below).",
            "note",
        )
        shares = shares.head(SHARE_ROWS)
    if len(design) > WIDE_DESIGN and len(shares) <= 12:
        shares = _transposed(shares)
    page.table(shares, name="configurations")
    speedup = points["speedup"].to_numpy(dtype=float) if "speedup" in points else None
    page.figure(
        analysis.shipped_map(
            points[inputs],
            space,
            points["configuration"].tolist(),
            points["fraction"].to_numpy(dtype=float),
            speedup,
        ),
        "What the header ships per input value: its configuration (named as in the table "
        "above), the fraction of the best known"
        + (" and the speed-up over the reference" if speedup is not None else ""),
    )
    label = "expert" if reference is not None and reference.kind == "expert" else "reference"
    frame = _points_frame(points, inputs, design, objective_unit(campaign), label)
    shown = frame
    if len(frame) > SHIPPED_ROWS:
        worst = np.argsort(points["fraction"].to_numpy(dtype=float), kind="stable")
        shown = frame.iloc[worst[:SHIPPED_ROWS]]
        page.paragraph(
            f"The {SHIPPED_ROWS} input values of lowest fraction of the best known, of "
            f"{len(frame)} (all of them in the CSV below):",
            "note",
        )
    page.table(shown, name="shipped")
    page.links(
        "Every input value:",
        [("shipped_per_input.csv", csv_data_uri(_machine_frame(points)))],
    )
    if objective_unit(campaign) is None:
        page.paragraph(
            f"{campaign.setup.objectives[0]} in the unit the kernel reports, over "
            f"{number(len(points))} input values.",
            "note",
        )


def _machine_frame(points: pd.DataFrame) -> pd.DataFrame:
    """The per-point table for machines: raw numbers, no rounding."""
    return points.rename(
        columns={"fraction": "fraction_of_best_known", "measured": "time_measured"}
    )
