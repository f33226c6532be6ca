"""The report's page model and its text formatting.

:class:`_Page` collects sections of plain text, tables, figures, links and code; the Jinja2
template ``templates/report.html.j2`` (package data) lays them out and escapes every text
(autoescape on), so no HTML is built in Python. The formatting functions turn values into text
a reader takes in: numbers rounded to 4 significant digits, times with a unit, mappings and
lists as words (never JSON).
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Mapping
from typing import Any

import jinja2
import numpy as np
import pandas as pd


@functools.cache
def _template() -> jinja2.Template:
    """``templates/report.html.j2`` (package data), with autoescaping on."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("mlkaps_gpu.validation", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return environment.get_template("report.html.j2")


class _Page:
    """The report's content: sections (a heading and its blocks) of plain text, figures,
    tables, links and code, rendered by the template, which escapes every text."""

    def __init__(self) -> None:
        self.sections: list[dict[str, Any]] = [{"title": None, "blocks": []}]
        self.figures: list[str] = []

    def _add(self, kind: str, **fields: Any) -> None:
        self.sections[-1]["blocks"].append({"kind": kind, **fields})

    def heading(self, text: str) -> None:
        """Start a section."""
        self.sections.append({"title": text, "blocks": []})

    def paragraph(self, text: str, css: str = "") -> None:
        self._add("paragraph", text=text, css=css)

    def table(self, rows: Mapping[str, Any] | pd.DataFrame, name: str = "") -> None:
        """A table with a column per frame column, or a row per key of a mapping; ``name``
        becomes the table's ``id`` (for tests and links)."""
        if isinstance(rows, pd.DataFrame):
            self._add(
                "frame",
                name=name,
                columns=[str(column) for column in rows.columns],
                rows=[[readable(v) for v in row] for row in rows.itertuples(index=False)],
            )
            return
        self._add("pairs", name=name, rows=[(str(k), readable(v)) for k, v in rows.items()])

    def figure(self, png: bytes | None, caption: str) -> None:
        """An inline PNG (nothing when ``png`` is None)."""
        if png is None:
            return
        self.figures.append(caption)
        self._add("figure", caption=caption, data=base64.b64encode(png).decode("ascii"))

    def links(self, text: str, targets: list[tuple[str, str]]) -> None:
        """A line of links (label, href) after ``text``; an href is a relative path or a
        ``data:`` URI (downloaded under the label's name)."""
        if targets:
            self._add("links", text=text, targets=targets)

    def code(self, text: str, summary: str | None = None) -> None:
        """Preformatted text, collapsed under ``summary`` when given."""
        self._add("code", text=text, summary=summary)

    def render(self, title: str) -> str:
        return _template().render(title=title, sections=self.sections)


def csv_data_uri(frame: pd.DataFrame) -> str:
    """The table as a CSV ``data:`` URI (the report stays one self-contained file)."""
    text = frame.to_csv(index=False)
    return "data:text/csv;base64," + base64.b64encode(text.encode("utf-8")).decode("ascii")


def number(value: Any) -> str:
    """A number rounded for reading: 4 significant digits, thousands separated for large
    integers; ``-`` for a missing or non-finite value."""
    if value is None:
        return "-"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return f"{int(value):,}" if abs(int(value)) >= 10_000 else str(int(value))
    if isinstance(value, float | np.floating):
        if not math.isfinite(float(value)):
            return "-"
        return f"{float(value):.4g}"
    return str(value)


def readable(value: Any) -> str:
    """Any value as words: numbers rounded (:func:`number`), a mapping as ``key value; ...``
    (underscores as spaces, nested mappings in parentheses), a list joined by commas."""
    if isinstance(value, Mapping):
        parts = []
        for key, item in value.items():
            text = readable(item)
            if isinstance(item, Mapping):
                text = f"({text})"
            parts.append(f"{str(key).replace('_', ' ')} {text}")
        return "; ".join(parts) if parts else "none"
    if isinstance(value, list | tuple):
        return ", ".join(readable(item) for item in value) if value else "none"
    try:
        missing = bool(pd.isna(value))
    except (TypeError, ValueError):
        missing = False
    if missing:
        return "-"
    return number(value)


def percent(fraction: Any, digits: int = 1) -> str:
    """A fraction as a percentage (``-`` when missing)."""
    if fraction is None or not math.isfinite(float(fraction)):
        return "-"
    return f"{100 * float(fraction):.{digits}f} %"


#: Seconds per unit of a recorded time.
_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def duration(value: Any, unit: str | None) -> str:
    """A time in the unit that reads best (ns, µs, ms, s), from a value recorded in ``unit``
    (a no-break space before the unit); without a unit, the number as recorded."""
    if value is None or not math.isfinite(float(value)):
        return "-"
    if unit not in _SECONDS:
        return f"{float(value):.4g}"
    seconds = float(value) * _SECONDS[unit]
    for name, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.4g}\u00a0{name}"
    return f"{seconds / 1e-9:.4g}\u00a0ns"
