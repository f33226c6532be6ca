"""PythonExecutor: model mode, measure mode, failures as results."""

from __future__ import annotations

import json
import math
import time

import pandas as pd
import pytest

from mlkaps_gpu.executors import _timing as timing
from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._python import PythonExecutor

ROWS = pd.DataFrame({"n": [1, 2, 3, 4], "mode": ["a", "b", "a", "b"]})


def model(row):
    if row["n"] == 3:
        raise ValueError("n = 3 is not supported\nsecond line")
    if row["n"] == 4:
        return math.inf
    return row["n"] * (2.0 if row["mode"] == "b" else 1.0)


def test_model_mode_values_and_failures():
    result = PythonExecutor(model).run(ROWS)
    assert result["status"].tolist() == ["ok", "ok", "runtime_error", "invalid_measurement"]
    assert result["time"].tolist()[:2] == [1.0, 4.0]
    assert result["message"].iloc[2] == "ValueError: n = 3 is not supported second line"
    assert "not a possible measurement" in result["message"].iloc[3]
    assert result["time"].iloc[2:].isna().all()
    assert result["n_repeats"].tolist() == [1, 1, 0, 0]
    assert json.loads(result["raw_times"].iloc[1]) == [4.0]


def test_model_receives_python_scalars():
    seen = []

    def record(row):
        seen.append(row)
        return 1.0

    PythonExecutor(record).run(ROWS)
    assert seen[0] == {"n": 1, "mode": "a"}
    assert type(seen[0]["n"]) is int


def test_multi_objective_dict():
    def two(row):
        return {"time": row["n"] * 1.0, "energy": row["n"] * 10.0, "ignored": 0}

    executor = PythonExecutor(two, objectives=("time", "energy"))
    result = executor.run(ROWS)
    assert list(result.columns[:2]) == ["time", "energy"]
    assert result["energy"].tolist() == [10.0, 20.0, 30.0, 40.0]
    missing = PythonExecutor(lambda row: {"time": 1.0}, objectives=("time", "energy")).run(ROWS)
    assert set(missing["status"]) == {"runtime_error"}
    assert "energy" in missing["message"].iloc[0]
    scalar = PythonExecutor(lambda row: 1.0, objectives=("time", "energy")).run(ROWS)
    assert set(scalar["status"]) == {"runtime_error"}
    text = PythonExecutor(lambda row: "fast").run(ROWS)
    assert "not a number" in text["message"].iloc[0]


def test_model_repeats_take_the_median():
    calls = iter([3.0, 1.0, 2.0, 10.0, 30.0, 20.0])
    result = PythonExecutor(lambda row: next(calls), repeats=3).run(ROWS.iloc[:2])
    assert result["time"].tolist() == [2.0, 20.0]
    assert json.loads(result["raw_times"].iloc[0]) == [3.0, 1.0, 2.0]
    assert result["n_repeats"].tolist() == [3, 3]


def test_measure_mode_times_the_routine(monkeypatch):
    monkeypatch.setattr(timing, "WAKE_S", 0.0)  # warmup runs exactly, cold or not
    calls = []

    def routine(n, mode):
        calls.append((n, mode))
        if n == 2:
            raise RuntimeError("boom")
        time.sleep(0.002 * n)

    executor = PythonExecutor(routine, measure=True, repeats=3, warmup=2)
    result = executor.run(ROWS.iloc[[0, 1, 2]])
    assert result["status"].tolist() == ["ok", "runtime_error", "ok"]
    assert result["message"].iloc[1] == "RuntimeError: boom"
    assert result["n_repeats"].tolist() == [3, 0, 3]
    times = json.loads(result["raw_times"].iloc[2])
    assert len(times) == 3 and min(times) >= 0.006
    assert result["time"].iloc[2] == sorted(times)[1]
    assert result["time"].iloc[0] < result["time"].iloc[2]
    assert calls.count((1, "a")) == 5  # warmup + repeats
    assert calls.count((2, "b")) == 1  # stops at the first failure


def test_measure_mode_bad_signature_is_a_result():
    result = PythonExecutor(lambda n: None, measure=True).run(ROWS.iloc[:1])
    assert result["status"].iloc[0] == "runtime_error"
    assert result["message"].iloc[0].startswith("TypeError")


@pytest.mark.parametrize(
    "options",
    [
        {"repeats": 0},
        {"warmup": -1},
        {"timer": "gpu"},
        {"objectives": ()},
        {"objectives": ("time", "time")},
        {"measure": True, "objectives": ("time", "energy")},
    ],
)
def test_bad_setup(options):
    with pytest.raises(ExecutorError):
        PythonExecutor(model, **options)


def test_not_callable():
    with pytest.raises(ExecutorError, match="not callable"):
        PythonExecutor(42)  # type: ignore[arg-type]
