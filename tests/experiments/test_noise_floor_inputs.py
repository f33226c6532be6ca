"""experiments/noise_floor_inputs.py: one repeat's optimum scored on another, on a table small
enough to work out by hand."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from tests.experiments._scripts import load_script

floor = load_script("noise_floor_inputs")


def write_table(path, rows):
    meta = {"name": "tiny", "numerical_features": ["m"], "categorical_features": []}
    lines = ["m,choice,feedback", *(f"{m},{c},{t}" for m, c, t in rows)]
    path.write_text(json.dumps(meta) + "\n" + "\n".join(lines) + "\n")
    return path


def test_each_repeats_optimum_scored_on_the_other(tmp_path):
    # m = 1: the same order in both repeats; m = 2: x is faster in repeat 0, y in repeat 1;
    # m = 3 failed once and has one cell left: no choice there to get wrong
    rows = [(1, "x", 1.0), (1, "y", 1.1), (1, "x", 1.0), (1, "y", 1.1)]
    rows += [(2, "x", 1.0), (2, "y", 1.1), (2, "x", 1.2), (2, "y", 1.05)]
    rows += [(3, "x", 1.0), (3, "y", "inf"), (3, "x", 2.0), (3, "y", 1.0)]
    table = floor.repeats_table(write_table(tmp_path / "t.txt", rows))
    floors = floor.noise_floor(table).set_index(["figure", "a"])["geomean"]
    assert floors[("repeat a -> repeat b", 0)] == pytest.approx(math.sqrt(1.05 / 1.2))
    assert floors[("repeat a -> repeat b", 1)] == pytest.approx(math.sqrt(1.0 / 1.1))
    # with two repeats, "the others" of one repeat are the other one
    assert floors[("every cell once", 0)] == pytest.approx(math.sqrt(1.05 / 1.2))


def test_main_writes_the_table_and_refuses_a_table_without_repeats(tmp_path, capsys):
    rows = [(m, c, t * m) for m in (1, 2) for c, t in (("x", 1.0), ("y", 2.0)) for _ in (0, 1)]
    data = write_table(tmp_path / "two.txt", rows)
    assert floor.main(["--data", str(data), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "noise_floor_inputs_two.md").read_text()
    assert "commit:" in text and "| repeat a -> repeat b | repeat 0 | repeat 1 | 1.0000 |" in text
    frame = pd.read_csv(tmp_path / "out" / "noise_floor_inputs_two.csv", comment="#")
    assert (frame["geomean"] == 1.0).all()
    once = write_table(tmp_path / "once.txt", [(1, "x", 1.0), (1, "y", 2.0)])
    assert floor.main(["--data", str(once), "--out", str(tmp_path / "out")]) == 2
    assert "no repeated measurements" in capsys.readouterr().err
