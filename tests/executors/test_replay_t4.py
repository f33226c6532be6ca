"""T4 results files as replay data: synthetic files, the config keys, and the A100 measurements in
both formats when ``MLKAPS_GPU_DATA`` is set."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.executors import (
    ReplayDataError,
    ReplayExecutor,
    load_kernel_tuner_cache,
    load_t4_results,
    replay_format,
)


def _entry(
    block: int,
    variant: str,
    time: Any = None,
    *,
    invalidity: str = "correct",
    correctness: int = 1,
    runtimes: list[float] | None = None,
    measurements: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    if measurements is None:
        measurements = [{"name": "time", "value": time, "unit": "ms"}]
        measurements.append({"name": "GFLOP/s", "value": 1.0, "unit": ""})
    return {
        "timestamp": "2026-01-01 00:00:00+00:00",
        "configuration": {"block": block, "variant": variant},
        "times": {"compilation": 1.0, "runtimes": runtimes or []},
        "invalidity": invalidity,
        "correctness": correctness,
        "measurements": measurements,
        "objectives": ["time"],
    }


ENTRIES = [
    _entry(64, "b", 2.0, runtimes=[2.1, 1.9, 2.0]),
    _entry(32, "a", 1.5),
    _entry(128, "a", invalidity="compile", measurements=[]),
    _entry(32, "b", "RuntimeFailedConfig"),
    _entry(64, "a", invalidity="constraints", measurements=[]),
    _entry(128, "b", invalidity="timeout", measurements=[]),
    _entry(16, "a", 0.5, correctness=0),
    _entry(16, "b", measurements=[{"name": "energy", "value": 3.0}]),
]


def _write(path: Path, document: Any, *, compress: bool = False) -> Path:
    text = json.dumps(document)
    if compress:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.fixture
def results_file(tmp_path: Path) -> Path:
    document = {"schema_version": "1.0.0", "metadata": {}, "results": ENTRIES}
    return _write(tmp_path / "k.json", document)


def test_layout_statuses_and_runtimes(results_file: Path):
    table = load_t4_results(results_file)
    records = table.records
    assert table.keys == ("block", "variant")
    assert table.tune_params == {"block": [16, 32, 64, 128], "variant": ["a", "b"]}
    assert records["block"].dtype == np.int64
    assert records["status"].tolist() == [
        "ok",
        "ok",
        "compile_error",
        "runtime_error",
        "invalid",
        "timeout",
        "invalid",
        "runtime_error",
    ]
    assert records["time"].iloc[0] == 2.0 and records["time"].iloc[1] == 1.5
    assert records.loc[records["status"] != "ok", "time"].isna().all()
    assert json.loads(records["raw_times"].iloc[0]) == [2.1, 1.9, 2.0]
    assert json.loads(records["raw_times"].iloc[1]) == [1.5]  # no runtimes: the value itself
    messages = records["message"].tolist()
    assert messages[2] == "invalidity: compile"
    assert messages[3] == "RuntimeFailedConfig"
    assert "wrong result" in messages[6]  # a fast but wrong answer is no optimum
    assert "no 'time' measurement (has: energy)" in messages[7]
    assert table.best() == 1.5


def test_another_measurement_as_objective(results_file: Path):
    table = load_t4_results(results_file, objective="GFLOP/s")
    assert table.objective == "GFLOP/s"
    assert table.records["GFLOP/s"].iloc[0] == 1.0
    assert table.records["status"].iloc[7] == "runtime_error"  # no GFLOP/s there


def test_gzip_and_an_unfinished_file(tmp_path: Path):
    document = {"schema_version": "1.0.0", "results": ENTRIES[:2]}
    packed = _write(tmp_path / "k.json.gz", document, compress=True)
    assert load_t4_results(packed).records["time"].tolist() == [2.0, 1.5]
    text = json.dumps(document)
    cut = text[: text.rindex("]")].rstrip() + ","  # written by appending, never closed
    unfinished = tmp_path / "u.json"
    unfinished.write_text(cut)
    assert load_t4_results(unfinished).records["time"].tolist() == [2.0, 1.5]


def test_duplicates_are_refused_or_the_first_kept(tmp_path: Path):
    document = {"results": [_entry(32, "a", 1.0), _entry(64, "a", 2.0), _entry(32, "a", 3.0)]}
    path = _write(tmp_path / "d.json", document)
    with pytest.raises(ReplayDataError, match=r"d\.json: 1 configuration.*results\[2\]"):
        load_t4_results(path)
    kept = load_t4_results(path, duplicates="first")
    assert kept.records["time"].tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1, 2], r"bad\.json: not T4 results \(top level is list"),
        ({"cache": {}}, r"missing key 'results'\) \(a Kernel Tuner cache: use format"),
        ({"schema_version": "2.0.0", "results": ENTRIES}, r"schema_version '2\.0\.0'"),
        ({"results": []}, r"'results' is not a non-empty list"),
        ({"results": [{"measurements": []}]}, r"results\[0\] has no 'configuration'"),
        (
            {"results": [ENTRIES[0], {**ENTRIES[1], "configuration": {"block": 1}}]},
            r"results\[1\] has other parameters than results\[0\] \(missing \['variant'\]",
        ),
        ({"results": [{**ENTRIES[0], "invalidity": "slow"}]}, r"results\[0\].*'slow' \(allowed"),
        ({"results": [{**ENTRIES[0], "measurements": None}]}, r"no 'measurements' list"),
        (
            {"results": [{**ENTRIES[0], "configuration": {"status": 1}}]},
            r"\['status'\] clash with result columns",
        ),
        (
            {"results": [{**ENTRIES[0], "configuration": {"block": [1, 2]}}]},
            r"'block' has missing or non-scalar values",
        ),
    ],
)
def test_errors_name_the_file_and_the_entry(tmp_path: Path, document: Any, message: str):
    path = _write(tmp_path / "bad.json", document)
    with pytest.raises(ReplayDataError, match=message):
        load_t4_results(path)


def test_replay_format_is_read_from_the_content(tmp_path: Path, results_file: Path):
    cache = _write(tmp_path / "c.json", {"tune_params_keys": ["x"], "cache": {}})
    (tmp_path / "t.csv").write_text("x,objective\n1,2.0\n")
    (tmp_path / "broken.json").write_text("{not json")
    assert replay_format(results_file) == "t4"
    assert replay_format(cache) == "kernel_tuner"
    assert replay_format(tmp_path / "t.csv") == "csv"
    assert replay_format(tmp_path / "broken.json") == "kernel_tuner"  # its loader says why
    with pytest.raises(ReplayDataError, match="no such file"):
        replay_format(tmp_path / "missing.json")


def test_replay_executor_runs_a_t4_table(tmp_path: Path, results_file: Path):
    other = {"results": [_entry(32, "a", 3.0), _entry(64, "b", 0.25)]}
    _write(tmp_path / "g2.json", other)
    executor = ReplayExecutor.from_files(
        {"gpu": {"g1": results_file, "g2": tmp_path / "g2.json"}}, format="t4"
    )
    assert executor.optimum("g1")[0] == 1.5
    assert executor.optimum("g2") == (0.25, {"block": 64, "variant": "b"})
    rows = pd.DataFrame(
        {
            "gpu": ["g1", "g1", "g2", "g2"],
            "block": [32, 128, 64, 16],
            "variant": ["a", "a", "b", "a"],
        }
    )
    out = executor.run(rows)
    assert out["status"].tolist() == ["ok", "compile_error", "ok", "invalid"]
    assert out["time"].iloc[0] == 1.5 and out["time"].iloc[2] == 0.25
    assert math.isnan(out["time"].iloc[1])


def _config(tmp_path: Path, kernel: str) -> str:
    return (
        '[campaign]\nname = "c"\n[kernel]\nexecutor = "replay"\n'
        f'{kernel}\n[objectives]\ntime = "minimize"\n[sampling]\nbudget = 10\n'
    )


def test_a_t4_config_prepares_a_replay(tmp_path: Path, results_file: Path):
    from mlkaps_gpu.campaign import parse_config, prepare

    text = _config(tmp_path, 'format = "t4"\nfiles = "k.json"')
    config = parse_config(text, path=tmp_path / "c.toml", label="c.toml")
    assert config.kernel.format == "t4"
    assert config.kernel.replay_options() == {}
    executor = prepare(config).executor
    assert isinstance(executor, ReplayExecutor)
    assert executor.optimum()[0] == 1.5


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        ('format = "t4"\nfiles = "k.json"\ndesign_columns = ["block"]', 'format = "csv"'),
        (
            'format = "t4"\nfiles = "k.json"\nkey_suffix = ",1"\nsuffix_keys = ["x"]',
            'applies only to format = "kernel_tuner"',
        ),
        ('format = "t5"\nfiles = "k.json"', "t4"),
    ],
)
def test_keys_of_other_formats_are_refused(tmp_path: Path, kernel: str, message: str):
    from mlkaps_gpu.campaign import ConfigError, parse_config

    (tmp_path / "k.json").write_text("{}")
    with pytest.raises(ConfigError, match=message):
        parse_config(_config(tmp_path, kernel), path=tmp_path / "c.toml", label="c.toml")


# ----------------------------------------------------------------------------- real data
def test_the_a100_in_both_formats_is_the_same_data(replay_data):
    folder = replay_data / "convolution_6gpu"
    t4 = load_t4_results(folder / "A100_T4.json.gz")
    cache = load_kernel_tuner_cache(folder / "A100.json.gz")
    assert t4.keys == cache.keys
    assert t4.tune_params == cache.tune_params
    keys = list(t4.keys)
    both = t4.records.merge(cache.records, on=keys, suffixes=("_t4", "_cache"), validate="1:1")
    assert len(both) == len(t4.records) == len(cache.records) == 4362
    assert (both["status_t4"] == both["status_cache"]).all()
    assert t4.n_failed() == cache.n_failed() == 161
    ok = both["status_t4"] == "ok"
    assert np.array_equal(both.loc[ok, "time_t4"], both.loc[ok, "time_cache"])
    assert t4.best() == cache.best()
