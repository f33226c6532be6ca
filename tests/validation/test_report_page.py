"""The report's formatting: values as words a reader takes in, never JSON; times with units."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.validation._report_page import (
    _Page,
    csv_data_uri,
    duration,
    number,
    percent,
    readable,
)


def test_readable_writes_records_as_words() -> None:
    confirmation = {"measured_answers": 4, "measured_neighbours": 2, "rounds": 3}
    assert readable(confirmation) == "measured answers 4; measured neighbours 2; rounds 3"
    assert readable({"joint": 183}) == "joint 183"
    assert readable({"tree": {"depth": 3, "leaves": 5}, "ok": True}) == (
        "tree (depth 3; leaves 5); ok yes"
    )
    assert readable([0.51234567, 0.7]) == "0.5123, 0.7"
    assert readable({}) == "none" and readable([]) == "none"
    assert readable(None) == "-" and readable(float("nan")) == "-" and readable(pd.NA) == "-"
    for value in (confirmation, [1, 2], {"a": [1, {"b": 2}]}):
        text = readable(value)
        with pytest.raises(ValueError):
            json.loads(text)


def test_numbers_are_rounded_for_reading() -> None:
    assert number(0.123456) == "0.1235" and number(np.float32(2.5)) == "2.5"
    assert number(12) == "12" and number(np.int64(4299)) == "4299"
    assert number(20015) == "20,015" and number(float("inf")) == "-"
    assert number(np.bool_(False)) == "no"
    assert percent(0.0123) == "1.2 %" and percent(0.5, 0) == "50 %" and percent(None) == "-"


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (7.251e-06, "s", "7.251\u00a0µs"),
        (0.0112, "s", "11.2\u00a0ms"),
        (2.5, "s", "2.5\u00a0s"),
        (0.733056, "ms", "733.1\u00a0µs"),
        (1362.8, "ms", "1.363\u00a0s"),
        (3e-10, "s", "0.3\u00a0ns"),
        (0.733056, None, "0.7331"),
        (float("nan"), "s", "-"),
    ],
)
def test_duration_picks_the_unit_that_reads_best(value: float, unit: str | None, text: str) -> None:
    assert duration(value, unit) == text


def test_tables_and_links_render_as_text() -> None:
    page = _Page()
    page.table({"confirmation": {"rounds": 1, "measured_answers": 0}}, name="pairs")
    frame = pd.DataFrame({"leaves": [{"joint": 4}], "time": [0.123456]})
    page.table(frame, name="frame")
    uri = csv_data_uri(pd.DataFrame({"n": [32, 64], "time": [1.5, 2.5]}))
    page.links("Every input value:", [("all.csv", uri), ("optima.csv", "optima.csv")])
    text = page.render("t")
    assert (
        '<table id="pairs"><tr><th>confirmation</th><td>rounds 1; measured answers 0</td>' in text
    )
    assert '<table id="frame">' in text and "<td>joint 4</td>" in text and "<td>0.1235</td>" in text
    assert f'<a href="{uri}" download="all.csv">all.csv</a>' in text
    assert '<a href="optima.csv">optima.csv</a>' in text
    decoded = base64.b64decode(uri.split(",", 1)[1]).decode("utf-8")
    assert decoded.splitlines() == ["n,time", "32,1.5", "64,2.5"]
