"""ReplayExecutor: lookups, absent configurations, order, input mapping, optimum; on synthetic
tables and on the real data when ``MLKAPS_GPU_DATA`` is set."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._kernel_tuner_cache import load_kernel_tuner_cache
from mlkaps_gpu.executors._replay import NOT_IN_DATA, ReplayExecutor
from mlkaps_gpu.executors._replay_data import ReplayDataError, load_replay_csv

RESULT_COLUMNS = ["time", "status", "n_repeats", "raw_times", "message"]


@pytest.fixture
def two_caches(write_cache, make_document):
    fast = {
        (16, 1, "a"): {"time": 2.0, "times": [1.9, 2.0, 2.1]},
        (32, 1, "a"): {"time": 1.5},
        (64, 2, "b"): {"time": "CompilationFailedConfig"},
        (32, 2, "b"): {"time": 0.75, "times": [0.75, 0.75]},
    }
    slow = {
        (16, 1, "a"): {"time": 4.0},
        (32, 1, "a"): {"time": 3.0},
        (64, 2, "b"): {"time": 5.0},
        (32, 2, "b"): {"time": "RuntimeFailedConfig"},
    }
    return {
        "fast": load_kernel_tuner_cache(write_cache(make_document(fast), "fast.json")),
        "slow": load_kernel_tuner_cache(write_cache(make_document(slow), "slow.json", gz=True)),
    }


def test_single_table_lookups_equal_records(two_caches):
    cache = two_caches["fast"]
    executor = ReplayExecutor(cache)
    assert executor.input_parameter() is None
    assert executor.objectives == ("time",)
    result = executor.run(cache.records[list(cache.keys)])
    assert list(result.columns) == RESULT_COLUMNS
    pd.testing.assert_series_equal(result["time"], cache.records["time"])
    assert result["status"].tolist() == cache.records["status"].tolist()
    assert result["raw_times"].tolist() == cache.records["raw_times"].tolist()
    assert result["n_repeats"].tolist() == [3, 1, 0, 2]
    assert result["message"].tolist() == ["", "", "CompilationFailedConfig", ""]


def test_design_parameters(two_caches):
    parameters = ReplayExecutor(two_caches["fast"]).design_parameters()
    assert [(p.name, p.kind, p.values) for p in parameters] == [
        ("bx", "int", (16, 32, 64)),
        ("by", "int", (1, 2)),
        ("mode", "categorical", ("a", "b")),
    ]


def test_absent_configuration_is_invalid_and_order_is_kept(two_caches):
    executor = ReplayExecutor(two_caches["fast"])
    rows = pd.DataFrame(
        {
            "bx": [32, 64, 16, 48, 32, 16],
            "by": [2, 1, 1, 1, 1, 1],
            "mode": ["b", "a", "a", "a", "a", "zzz"],
            "unrelated": range(6),
        },
        index=[10, 11, 12, 13, 14, 15],
    )
    result = executor.run(rows)
    assert result["status"].tolist() == ["ok", "invalid", "ok", "invalid", "ok", "invalid"]
    assert result["time"].tolist()[0] == 0.75
    assert result["time"].tolist()[2] == 2.0
    assert result["time"].tolist()[4] == 1.5
    invalid = result["status"] == "invalid"
    assert result.loc[invalid, "message"].eq(NOT_IN_DATA).all()
    assert result.loc[invalid, "time"].isna().all()
    assert result.loc[invalid, "raw_times"].eq("[]").all()
    assert result.loc[invalid, "n_repeats"].eq(0).all()
    reversed_result = executor.run(rows.iloc[::-1])
    assert reversed_result["status"].tolist() == result["status"].tolist()[::-1]


def test_value_types_are_matched_by_value(two_caches):
    executor = ReplayExecutor(two_caches["fast"])
    rows = pd.DataFrame({"bx": [32.0, 32.5, np.nan], "by": [2.0, 2.0, 2.0], "mode": "b"})
    assert executor.run(rows)["status"].tolist() == ["ok", "invalid", "invalid"]


def test_missing_column_is_a_setup_error(two_caches):
    with pytest.raises(ExecutorError, match="lack column"):
        ReplayExecutor(two_caches["fast"]).run(pd.DataFrame({"bx": [16], "by": [1]}))


def test_input_mapping(two_caches):
    executor = ReplayExecutor({"gpu": {"slow": two_caches["slow"], "fast": two_caches["fast"]}})
    parameter = executor.input_parameter()
    assert parameter is not None
    assert (parameter.name, parameter.kind, parameter.values) == (
        "gpu",
        "categorical",
        ("slow", "fast"),
    )
    rows = pd.DataFrame(
        {
            "gpu": ["fast", "slow", "slow", "fast", "other"],
            "bx": [32, 32, 32, 64, 32],
            "by": [2, 2, 1, 2, 1],
            "mode": ["b", "b", "a", "b", "a"],
        }
    )
    result = executor.run(rows)
    assert result["status"].tolist() == ["ok", "runtime_error", "ok", "compile_error", "invalid"]
    assert result["time"].iloc[0] == 0.75
    assert result["time"].iloc[2] == 3.0
    assert result["message"].iloc[4].startswith(NOT_IN_DATA)
    with pytest.raises(ExecutorError, match="lack column"):
        executor.run(rows.drop(columns="gpu"))


def test_optimum_and_valid_configurations(two_caches):
    executor = ReplayExecutor({"gpu": two_caches})
    assert executor.optimum("fast") == (0.75, {"bx": 32, "by": 2, "mode": "b"})
    assert executor.optimum("slow") == (3.0, {"bx": 32, "by": 1, "mode": "a"})
    assert isinstance(executor.optimum("fast")[1]["bx"], int)
    with pytest.raises(ExecutorError, match="input value"):
        executor.optimum()
    with pytest.raises(ExecutorError, match="no table"):
        executor.optimum("medium")
    valid = executor.valid_configurations("slow")
    assert list(valid.columns) == ["bx", "by", "mode", "time"]
    assert valid["time"].tolist() == [4.0, 3.0, 5.0]
    everything = executor.valid_configurations()
    assert list(everything.columns) == ["gpu", "bx", "by", "mode", "time"]
    assert len(everything) == 6
    single = ReplayExecutor(two_caches["fast"])
    assert single.optimum()[0] == 0.75
    with pytest.raises(ExecutorError):
        single.optimum("fast")


def test_mismatched_keys_name_the_file(two_caches, write_cache, make_document):
    other = make_document(
        {(16, 1): {"time": 1.0}}, keys=("bx", "by"), tune_params={"bx": [16], "by": [1]}
    )
    short = load_kernel_tuner_cache(write_cache(other, "short.json"))
    with pytest.raises(ReplayDataError, match=r"^short\.json: design parameters differ"):
        ReplayExecutor({"gpu": {"fast": two_caches["fast"], "short": short}})


def test_bad_mappings(two_caches):
    with pytest.raises(ExecutorError, match="exactly one input name"):
        ReplayExecutor({"gpu": {"a": two_caches["fast"]}, "n": {"b": two_caches["slow"]}})
    with pytest.raises(ExecutorError, match="not a loaded table"):
        ReplayExecutor({"gpu": {"a": "fast.json"}})  # type: ignore[dict-item]


def test_from_files_kernel_tuner(two_caches):
    paths = {"gpu": {name: cache.path for name, cache in two_caches.items()}}
    executor = ReplayExecutor.from_files(paths)
    assert executor.inputs == ["fast", "slow"]
    assert executor.optimum("fast")[0] == 0.75
    single = ReplayExecutor.from_files(two_caches["fast"].path)
    assert single.optimum()[0] == 0.75


def test_from_files_csv_with_integer_input(tmp_path: Path):
    for n, scale in ((100, 1.0), (200, 8.0)):
        (tmp_path / f"n{n}.csv").write_text(
            f"p0,p3,objective\n,4,{0.5 * scale}\n#pragma x,4,{0.25 * scale}\n,8,{0.75 * scale}\n"
        )
    executor = ReplayExecutor.from_files(
        {"n": {100: tmp_path / "n100.csv", 200: tmp_path / "n200.csv"}},
        format="csv",
        design_columns=["p0", "p3"],
        failure_values=(),
    )
    parameter = executor.input_parameter()
    assert parameter is not None and parameter.kind == "int" and parameter.values == (100, 200)
    rows = pd.DataFrame({"n": [200, 100, 100], "p0": ["#pragma x", "", "#pragma x"], "p3": 4})
    result = executor.run(rows)
    assert result["time"].tolist() == [2.0, 0.5, 0.25]
    assert executor.optimum(200) == (2.0, {"p0": "#pragma x", "p3": 4})
    with pytest.raises(ExecutorError, match="design_columns"):
        ReplayExecutor.from_files(tmp_path / "n100.csv", format="csv")


def random_rows(executor: ReplayExecutor, n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    columns = {p.name: p.sample(n, rng, discrete=True) for p in executor.design_parameters()}
    rows = pd.DataFrame(columns)
    parameter = executor.input_parameter()
    if parameter is not None:
        rows.insert(0, parameter.name, parameter.sample(n, rng, discrete=True))
    return rows


def test_large_batch(two_caches):
    executor = ReplayExecutor({"gpu": two_caches})
    rows = random_rows(executor, 100_000, seed=1)
    result = executor.run(rows)
    assert len(result) == len(rows)
    # Spot-check against a dictionary built from the records.
    expected = {}
    for name, cache in two_caches.items():
        for record in cache.records.itertuples(index=False):
            expected[(name, record.bx, record.by, record.mode)] = record.status
    sample = rows.sample(500, random_state=0)
    for index, row in sample.iterrows():
        key = (row["gpu"], row["bx"], row["by"], row["mode"])
        assert result.at[index, "status"] == expected.get(key, "invalid")


# ----------------------------------------------------------------------------- real data
@pytest.fixture(scope="module")
def gpu_executor(convolution_caches):
    return ReplayExecutor({"gpu": convolution_caches})


def test_real_lookups_equal_records(gpu_executor, convolution_caches):
    for gpu, cache in convolution_caches.items():
        rows = cache.records[list(cache.keys)].copy()
        rows.insert(0, "gpu", gpu)
        result = gpu_executor.run(rows)
        np.testing.assert_array_equal(result["time"].to_numpy(), cache.records["time"].to_numpy())
        assert result["status"].tolist() == cache.records["status"].tolist()
        ok = result["status"] == "ok"
        assert (result.loc[ok, "n_repeats"] == 32).all()
        assert len(json.loads(result.loc[ok, "raw_times"].iloc[0])) == 32


def test_real_optimum(gpu_executor, convolution_caches):
    for gpu, cache in convolution_caches.items():
        best, configuration = gpu_executor.optimum(gpu)
        assert best == cache.best()
        row = pd.DataFrame([{"gpu": gpu, **configuration}])
        assert gpu_executor.run(row)["time"].iloc[0] == best
        valid = gpu_executor.valid_configurations(gpu)
        assert len(valid) == 4362 - cache.n_failed()
        assert valid["time"].min() == best
    parameter = gpu_executor.input_parameter()
    assert parameter is not None and parameter.values == (
        "A100",
        "A4000",
        "MI250X",
        "W6600",
        "W7800",
    )


def test_real_large_batch(gpu_executor):
    rows = random_rows(gpu_executor, 100_000, seed=2)
    result = gpu_executor.run(rows)
    assert len(result) == 100_000
    counts = result["status"].value_counts()
    assert counts["ok"] > 0 and counts["invalid"] > 0  # random rows break the restrictions
    assert result.loc[result["status"] == "ok", "time"].min() >= 0.55


def test_real_a6000_needs_alignment(replay_data, convolution_caches):
    path = replay_data / "convolution_6gpu" / "A6000_original.json.gz"
    with pytest.raises(ReplayDataError, match=r"^A6000_original\.json\.gz: design parameters"):
        ReplayExecutor(
            {"gpu": {"A100": convolution_caches["A100"], "A6000": load_kernel_tuner_cache(path)}}
        )
    aligned = load_kernel_tuner_cache(
        path,
        key_suffix=",1,1,15,15",
        suffix_keys=("use_shmem", "use_cmem", "filter_height", "filter_width"),
    )
    executor = ReplayExecutor({"gpu": {"A100": convolution_caches["A100"], "A6000": aligned}})
    assert executor.optimum("A6000")[0] == pytest.approx(0.7747, abs=1e-4)


def test_real_syr2k_by_problem_size(replay_data):
    folder = replay_data / "syr2k_cpu"
    design = ["p0", "p1", "p2", "p3", "p4", "p5"]
    tables = {
        130: load_replay_csv(folder / "all_SM_N130.csv", design_columns=design),
        2000: load_replay_csv(
            folder / "all_XL_N2000.csv", design_columns=design, failure_values=(1.0,)
        ),
    }
    executor = ReplayExecutor({"N": tables})
    rows = pd.concat(
        [table.records[design].assign(N=n) for n, table in tables.items()], ignore_index=True
    )
    result = executor.run(rows)
    assert (result["status"] == "runtime_error").sum() == 5
    assert (result["status"] == "invalid").sum() == 0
    best, configuration = executor.optimum(2000)
    assert best == tables[2000].best()
    assert not math.isnan(best) and best != 1.0
    assert set(configuration) == set(design)
