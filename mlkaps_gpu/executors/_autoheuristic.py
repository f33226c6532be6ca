"""PyTorch AutoHeuristic's data files, read as they are.

AutoHeuristic (``torchgen/_autoheuristic``, ``torch/_inductor/autoheuristic``) records, per input
shape, the kernel choices Inductor lists and their measured time. A file (gzip or plain text) has
one JSON line of metadata (``numerical_features`` and ``categorical_features`` name the inputs),
then a CSV with those columns, ``choice`` and ``feedback`` (the time; ``inf`` = the run failed).

A ``choice`` such as ``type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=128_numstages=3_numwarps=4``
becomes Triton design parameters named as C identifiers (:data:`TRITON_NAMES`: ``block_m``,
``block_k``, ``block_n``, ``num_stages``, ``num_warps``; another key ``KEY-X`` becomes
``key_x``). Any other choice (``extern_fallback_mixed_mm``, the vendor library path) is a
value of the categorical design parameter ``kind`` (present when the file has such choices;
Triton rows have ``kind = "triton"``), with every Triton parameter set to
:data:`NOT_TRITON` (0) there. :func:`choice_strings` maps design rows back to the choice text.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.executors._replay_data import ReplayDataError, check_file
from mlkaps_gpu.executors._replay_table import (
    Aggregate,
    InputTable,
    TableReplayExecutor,
    cells_from_runs,
    typed_column,
)

#: Prefix of a Triton choice.
TRITON_PREFIX = "type=triton_"
#: Names of the Triton keys of AutoHeuristic's choice strings, in their order there.
TRITON_NAMES: dict[str, str] = {
    "BLOCK-M": "block_m",
    "BLOCK-K": "block_k",
    "BLOCK-N": "block_n",
    "numstages": "num_stages",
    "numwarps": "num_warps",
}
#: Value of the Triton parameters of a choice that is not a Triton configuration.
NOT_TRITON = 0
#: The design parameter naming the kind of choice (``triton`` or the choice itself).
KIND = "kind"
TRITON = "triton"
_TOKEN = re.compile(r"([A-Za-z][A-Za-z0-9-]*)=(-?\d+)")


def read_autoheuristic(path: str | os.PathLike[str]) -> tuple[dict[str, Any], pd.DataFrame]:
    """The metadata (line 1, JSON) and the CSV rows of an AutoHeuristic file (gzip or text).

    Raises:
        ReplayDataError: naming the file and what is wrong.
    """
    path = check_file(path)
    name = path.name
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise ReplayDataError(f"{name}: cannot read ({exc})") from None
    first, _, rest = text.partition("\n")
    try:
        metadata = json.loads(first)
    except ValueError:
        raise ReplayDataError(
            f"{name}: line 1 is not JSON metadata (an AutoHeuristic file starts with "
            '{"numerical_features": [...], "categorical_features": [...], ...})'
        ) from None
    if not isinstance(metadata, dict):
        raise ReplayDataError(f"{name}: line 1 must be a JSON object")
    for key in ("numerical_features", "categorical_features"):
        value = metadata.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ReplayDataError(f"{name}: line 1: {key!r} must be a list of column names")
    try:
        # types inferred by the parser (fast); "inf" is a float, True / False are bools
        frame = pd.read_csv(io.StringIO(rest), keep_default_na=False, dtype={"choice": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ReplayDataError(f"{name}: the table after line 1 is not CSV ({first_line})") from None
    features = [*metadata["numerical_features"], *metadata["categorical_features"]]
    missing = [c for c in [*features, "choice", "feedback"] if c not in frame.columns]
    if missing:
        raise ReplayDataError(
            f"{name}: missing column(s) {', '.join(map(repr, missing))} (columns: "
            f"{', '.join(map(str, frame.columns))})"
        )
    return metadata, frame


def parse_choices(choices: Sequence[str] | pd.Series, *, name: str = "choices") -> pd.DataFrame:
    """Design columns of choice strings (one row per choice, see the module docstring).

    Raises:
        ReplayDataError: a Triton choice whose keys are not ``KEY=integer`` pairs.
    """
    series = pd.Series(np.asarray(choices, dtype=object))
    distinct = pd.unique(series)
    parsed: dict[str, dict[str, int]] = {}
    keys: list[str] = []
    for choice in distinct.tolist():
        text = str(choice).strip()
        if not text.startswith(TRITON_PREFIX):
            continue
        body = text[len(TRITON_PREFIX) :]
        tokens = body.split("_") if body else []
        values: dict[str, int] = {}
        for token in tokens:
            match = _TOKEN.fullmatch(token)
            if match is None:
                raise ReplayDataError(
                    f"{name}: choice {text!r}: {token!r} is not KEY=integer (expected e.g. "
                    "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=128_numstages=3_numwarps=4)"
                )
            key = parameter_name(match.group(1))
            values[key] = int(match.group(2))
            if key not in keys:
                keys.append(key)
        parsed[str(choice)] = values
    has_other = any(str(c) not in parsed for c in distinct.tolist())
    codes, uniques = pd.factorize(series)
    columns: dict[str, Any] = {}
    if has_other or not keys:
        kinds = np.array(
            [TRITON if str(c) in parsed else str(c).strip() for c in uniques.tolist()],
            dtype=object,
        )
        columns[KIND] = pd.Series(kinds[codes], dtype=object)
    for key in keys:
        per_choice = np.array(
            [parsed.get(str(c), {}).get(key, NOT_TRITON) for c in uniques.tolist()],
            dtype=np.int64,
        )
        columns[key] = per_choice[codes]
    return pd.DataFrame(columns)


def parameter_name(key: str) -> str:
    """The design parameter name of a Triton key (``BLOCK-M`` -> ``block_m``)."""
    if key in TRITON_NAMES:
        return TRITON_NAMES[key]
    return re.sub(r"[^0-9a-z]+", "_", key.lower()).strip("_") or "key"


def triton_key(name: str) -> str:
    """The choice-string key of a design parameter (inverse of :func:`parameter_name` for the
    keys of :data:`TRITON_NAMES`; ``key_x`` -> ``KEY-X`` for others)."""
    for key, value in TRITON_NAMES.items():
        if value == name:
            return key
    return name.upper().replace("_", "-")


def choice_strings(design: pd.DataFrame) -> pd.Series:
    """The AutoHeuristic ``choice`` text of each design row (the design columns of
    :func:`load_autoheuristic`, e.g. what the header answers): ``type=triton_...`` with the
    Triton parameters in the data's order, or the ``kind`` itself for another choice."""
    names = [c for c in design.columns if c != KIND]
    known = [n for n in TRITON_NAMES.values() if n in names]
    ordered = known + [n for n in names if n not in known]
    if not len(design):
        return pd.Series([], dtype=object)
    triton = TRITON_PREFIX + pd.Series("", index=design.index, dtype=object)
    for position, column in enumerate(ordered):
        separator = "" if position == 0 else "_"
        values = design[column].astype(np.int64).astype(str)
        triton = triton + separator + triton_key(column) + "=" + values
    if KIND in design.columns:
        kind = design[KIND].astype(str)
        return pd.Series(np.where(kind == TRITON, triton, kind), index=design.index, dtype=object)
    return triton.astype(object)


def autoheuristic_table(
    path: str | os.PathLike[str], *, objective: str = "time", aggregate: Aggregate = "median"
) -> InputTable:
    """An AutoHeuristic file as an :class:`InputTable` (records keep the ``choice`` text)."""
    metadata, frame = read_autoheuristic(path)
    name = Path(path).name
    inputs = [*metadata["numerical_features"], *metadata["categorical_features"]]
    design = parse_choices(frame["choice"], name=name)
    clash = sorted(set(design.columns) & set(inputs))
    if clash:
        raise ReplayDataError(f"{name}: feature(s) {clash} clash with the choice's parameters")
    runs = pd.DataFrame({c: typed_column(frame[c]) for c in inputs})
    for column in design.columns:
        runs[column] = design[column].to_numpy()
    runs["choice"] = frame["choice"].astype(str).str.strip().to_numpy(dtype=object)
    feedback = frame["feedback"]
    if not pd.api.types.is_numeric_dtype(feedback.dtype):
        feedback = pd.to_numeric(feedback.astype(str).str.strip(), errors="coerce")
    times = feedback.to_numpy(dtype=np.float64)
    failed = ~np.isfinite(times) | (times <= 0)
    return cells_from_runs(
        runs,
        path=Path(path),
        input_columns=inputs,
        design_columns=list(design.columns),
        times=times,
        failed=failed,
        objective=objective,
        aggregate=aggregate,
        extra=("choice",),
        metadata=metadata,
    )


def load_autoheuristic(
    path: str | os.PathLike[str], *, objective: str = "time", aggregate: Aggregate = "median"
) -> pd.DataFrame:
    """An AutoHeuristic file as one row per measured (shape, choice) cell.

    Returns:
        A table with the input columns (the metadata's features, in its order: numerical then
        categorical), the design columns (``kind`` where the file has non-Triton choices, then
        ``block_m`` ...), ``choice`` (the original text), ``objective`` (the median of the
        cell's finite repeat times; NaN when every repeat failed), ``status`` (``ok`` or
        ``runtime_error``), ``n_repeats`` and ``n_runs``. ``table.attrs`` holds
        ``input_columns``, ``design_columns`` and ``metadata``.
    """
    table = autoheuristic_table(path, objective=objective, aggregate=aggregate)
    records = table.records.copy()
    records.attrs = {
        "input_columns": table.input_names,
        "design_columns": table.design_names,
        "metadata": table.metadata,
    }
    return records


def autoheuristic_executor(
    path: str | os.PathLike[str], *, objective: str = "time", aggregate: Aggregate = "median"
) -> TableReplayExecutor:
    """A replay executor over an AutoHeuristic file."""
    return TableReplayExecutor(autoheuristic_table(path, objective=objective, aggregate=aggregate))


def choice_of(configuration: Mapping[str, Any]) -> str:
    """The choice text of one configuration (a dict of design values)."""
    return str(choice_strings(pd.DataFrame([dict(configuration)])).iloc[0])
