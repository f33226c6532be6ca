"""Kernel Tuner cache loader: synthetic files (formats, failure markings, repair, errors) and
the real convolution caches when ``MLKAPS_GPU_DATA`` is set."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

from mlkaps_gpu.executors._kernel_tuner_cache import (
    KernelTunerCache,
    load_kernel_tuner_cache,
    repair_truncated_json,
)
from mlkaps_gpu.executors._replay_data import ReplayDataError

ENTRIES = {
    (16, 1, "a"): {"time": 2.0, "times": [1.9, 2.0, 2.1]},
    (32, 1, "a"): {"time": 1.5, "times": [1.5, 1.5]},
    (64, 2, "b"): {"time": 3.25},
}


def status_of(cache: KernelTunerCache, bx: int, by: int, mode: str) -> tuple[str, str, float]:
    records = cache.records
    row = records[(records.bx == bx) & (records.by == by) & (records["mode"] == mode)]
    assert len(row) == 1
    return row["status"].iloc[0], row["message"].iloc[0], row["time"].iloc[0]


@pytest.mark.parametrize("gz", [False, True])
def test_loads_plain_and_gzip_by_magic_bytes(write_cache, make_document, gz):
    # The gzip file is named .json and the plain one .gz: detection must not use the name.
    path = write_cache(make_document(ENTRIES), "c.json" if gz else "c.json.gz", gz=gz)
    cache = load_kernel_tuner_cache(path)
    assert cache.path == path
    assert cache.device_name == "Test GPU"
    assert cache.kernel_name == "test_kernel"
    assert cache.keys == ("bx", "by", "mode")
    assert cache.objective == "time"
    assert cache.tune_params == {"bx": [16, 32, 64], "by": [1, 2], "mode": ["a", "b"]}
    records = cache.records
    assert list(records.columns) == ["bx", "by", "mode", "time", "status", "message", "raw_times"]
    assert records["bx"].dtype == np.int64
    assert records["by"].dtype == np.int64
    assert records["mode"].dtype == object
    assert records["time"].dtype == np.float64
    assert records["status"].dtype == object
    assert records["time"].tolist() == [2.0, 1.5, 3.25]
    assert set(records["status"]) == {"ok"}
    assert json.loads(records["raw_times"].iloc[0]) == [1.9, 2.0, 2.1]
    assert json.loads(records["raw_times"].iloc[2]) == [3.25]  # no "times": the time itself
    assert cache.best() == 1.5
    assert cache.n_failed() == 0


def test_float_parameters_are_float64(write_cache, make_document):
    document = make_document(
        {(0.5,): {"time": 1.0}, (1.0,): {"time": 2.0}},
        keys=("scale",),
        tune_params={"scale": [0.5, 1.0]},
    )
    cache = load_kernel_tuner_cache(write_cache(document))
    assert cache.records["scale"].dtype == np.float64
    assert cache.tune_params == {"scale": [0.5, 1.0]}


@pytest.mark.parametrize(
    ("marker", "status"),
    [
        ({"time": "RuntimeFailedConfig"}, "runtime_error"),
        ({"time": "CompilationFailedConfig"}, "compile_error"),
        ({"time": "InvalidConfig"}, "invalid"),
        ({"time": "SomethingElseFailed"}, "runtime_error"),
        ({"__error__": "CompilationFailedConfig"}, "compile_error"),
        ({"__error__": "out of resources", "time": 1.0}, "runtime_error"),
        ({"time": 1e20}, "runtime_error"),
        ({"time": 3e20}, "runtime_error"),
        ({"GFLOP/s": 10.0}, "runtime_error"),  # no time recorded at all
    ],
)
def test_failure_markings(write_cache, make_document, marker, status):
    entries = {**ENTRIES, (16, 2, "b"): marker}
    cache = load_kernel_tuner_cache(write_cache(make_document(entries), gz=True))
    got_status, message, time = status_of(cache, 16, 2, "b")
    assert got_status == status
    assert message  # a reason is always given
    assert math.isnan(time)
    assert cache.n_failed() == 1
    assert cache.records.loc[cache.records["status"] != "ok", "raw_times"].tolist() == ["[]"]
    assert status_of(cache, 32, 1, "a") == ("ok", "", 1.5)


def test_error_string_is_the_message(write_cache, make_document):
    entries = {**ENTRIES, (16, 2, "b"): {"time": "RuntimeFailedConfig"}}
    cache = load_kernel_tuner_cache(write_cache(make_document(entries)))
    assert status_of(cache, 16, 2, "b")[1] == "RuntimeFailedConfig"


def test_unfinished_file_is_repaired(write_cache, make_document):
    # Kernel Tuner's appended form: entries each followed by ",", closing "}}" missing.
    text = json.dumps(make_document(ENTRIES), indent=1)
    body = text.rstrip()
    assert body.endswith(("}\n}", "}}"))
    truncated = body[: body.rfind("}", 0, body.rfind("}"))].rstrip() + ",\n"
    assert truncated.rstrip().endswith("},")
    with pytest.raises(json.JSONDecodeError):
        json.loads(truncated)
    for gz in (False, True):
        cache = load_kernel_tuner_cache(write_cache(truncated, f"t{gz}.json", gz=gz))
        assert len(cache.records) == 3
        assert cache.records["time"].tolist() == [2.0, 1.5, 3.25]


def test_repair_tracks_brackets_outside_strings():
    assert repair_truncated_json('{"a": "x}]{[", "b": [1, {"c": 2},') == (
        '{"a": "x}]{[", "b": [1, {"c": 2}]}'
    )
    assert repair_truncated_json('{"a": "unterminated') is None
    assert repair_truncated_json('{"a": 1]') is None
    assert repair_truncated_json('{"a": 1}') is None  # nothing to close


def test_unrepairable_file_raises(write_cache):
    path = write_cache('{"cache": {"1": {"time": ', "broken.json")
    with pytest.raises(ReplayDataError, match=r"^broken\.json: not valid JSON"):
        load_kernel_tuner_cache(path)


def test_corrupt_gzip_raises(tmp_path: Path, make_document):
    data = gzip.compress(json.dumps(make_document(ENTRIES)).encode())
    path = tmp_path / "A100.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ReplayDataError, match=r"^A100\.json\.gz: corrupt gzip data$"):
        load_kernel_tuner_cache(path)


def test_missing_file_raises(tmp_path: Path):
    with pytest.raises(ReplayDataError, match="nothere.json.gz: no such file"):
        load_kernel_tuner_cache(tmp_path / "nothere.json.gz")


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"tune_params_keys": ["bx"]}, "not a Kernel Tuner cache (missing key 'cache')"),
        ({"cache": {}}, "not a Kernel Tuner cache (missing key 'tune_params_keys')"),
        ([1, 2], "not a Kernel Tuner cache (top level is list, not an object)"),
        ("", "empty file"),
        ({"tune_params_keys": ["bx", "by"], "cache": {"16": {"time": 1.0}}}, "has 1 values"),
    ],
)
def test_not_a_cache_raises(write_cache, document, problem):
    path = write_cache(document, "A100.json.gz", gz=True)
    with pytest.raises(ReplayDataError) as info:
        load_kernel_tuner_cache(path)
    message = str(info.value)
    assert message.startswith("A100.json.gz: ")
    assert problem in message
    assert "\n" not in message


def test_key_suffix_adds_constant_parameters(write_cache, make_document):
    entries = {(16, 1): {"time": 1.0}, (32, 2): {"time": 2.0}}
    document = make_document(entries, keys=("bx", "by"), tune_params={"bx": [16, 32], "by": [1, 2]})
    path = write_cache(document)
    cache = load_kernel_tuner_cache(path, key_suffix=",b,15", suffix_keys=("mode", "fh"))
    assert cache.keys == ("bx", "by", "mode", "fh")
    assert cache.tune_params["mode"] == ["b"]
    assert cache.tune_params["fh"] == [15]
    assert cache.records["fh"].dtype == np.int64
    assert cache.records["mode"].tolist() == ["b", "b"]
    with pytest.raises(ReplayDataError, match="name them with suffix_keys"):
        load_kernel_tuner_cache(path, key_suffix=",b,15")
    with pytest.raises(ReplayDataError, match="has 2 value"):
        load_kernel_tuner_cache(path, key_suffix=",b,15", suffix_keys=("mode",))
    with pytest.raises(ReplayDataError, match="repeat a parameter name"):
        load_kernel_tuner_cache(path, key_suffix=",b,15", suffix_keys=("bx", "fh"))


def test_values_come_from_the_key_when_the_entry_lacks_them(write_cache, make_document):
    document = make_document(ENTRIES)
    for entry in document["cache"].values():
        del entry["bx"], entry["mode"]
    cache = load_kernel_tuner_cache(write_cache(document))
    assert cache.records["bx"].tolist() == [16, 32, 64]
    assert cache.records["mode"].tolist() == ["a", "a", "b"]


# ----------------------------------------------------------------------------- real data
EXPECTED = {  # README: failed configurations and best time (ms) per GPU
    "A100": (161, 0.554, 5e-4),
    "A4000": (161, 1.02, 5e-3),
    "MI250X": (0, 0.659, 5e-4),
    "W6600": (0, 1.73, 5e-3),
    "W7800": (116, 0.816, 5e-4),
}


@pytest.mark.parametrize("gpu", sorted(EXPECTED))
def test_real_convolution_caches(convolution_caches, gpu):
    cache = convolution_caches[gpu]
    failed, best, tolerance = EXPECTED[gpu]
    assert len(cache.records) == 4362
    assert cache.keys == (
        "block_size_x",
        "block_size_y",
        "tile_size_x",
        "tile_size_y",
        "read_only",
        "use_padding",
        "use_shmem",
        "use_cmem",
        "filter_height",
        "filter_width",
    )
    assert cache.tune_params["block_size_x"] == list(range(16, 257, 16))
    assert cache.tune_params["block_size_y"] == [1, 2, 4, 8, 16]
    assert cache.n_failed() == failed
    assert cache.best() == pytest.approx(best, abs=tolerance)
    assert not cache.records.duplicated(list(cache.keys)).any()
    ok = cache.records[cache.records["status"] == "ok"]
    assert len(json.loads(ok["raw_times"].iloc[0])) == 32
    assert ok["time"].notna().all()


def test_real_failure_kinds(convolution_caches):
    counts = convolution_caches["A100"].records["status"].value_counts().to_dict()
    assert counts == {"ok": 4201, "runtime_error": 155, "compile_error": 6}
    counts = convolution_caches["W7800"].records["status"].value_counts().to_dict()
    assert counts == {"ok": 4246, "compile_error": 116}


def test_real_a6000_with_key_suffix(replay_data, convolution_caches):
    path = replay_data / "convolution_6gpu" / "A6000_original.json.gz"
    plain = load_kernel_tuner_cache(path)
    assert len(plain.keys) == 6
    cache = load_kernel_tuner_cache(
        path,
        key_suffix=",1,1,15,15",
        suffix_keys=("use_shmem", "use_cmem", "filter_height", "filter_width"),
    )
    assert len(cache.records) == 2442
    assert set(cache.keys) == set(convolution_caches["A100"].keys)
    assert cache.device_name == "NVIDIA RTX A6000"


def test_real_t4_file_is_not_a_cache(replay_data):
    with pytest.raises(ReplayDataError, match=r"A100_T4\.json\.gz: not a Kernel Tuner cache"):
        load_kernel_tuner_cache(replay_data / "convolution_6gpu" / "A100_T4.json.gz")
