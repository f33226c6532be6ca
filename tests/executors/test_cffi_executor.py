"""CffiExecutor: crashes, hangs, compile errors, wrong answers, cache, threads, buffers."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._cffi import CffiExecutor, macro_text, read_source
from mlkaps_gpu.executors._timing import TimingPolicy
from mlkaps_gpu.executors._worker_api import Design, KernelCall, split_prototype
from mlkaps_gpu.kernels._faulty import (
    FAULTY_ENTRY,
    FAULTY_SOURCE,
    check_faulty,
    faulty_arguments,
    faulty_arguments_unrestored,
)

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler"),
]

FAST = TimingPolicy(warmup=1, repeats=3)


def rows(*specs: dict) -> pd.DataFrame:
    base = {"n": 1000, "mode": 0, "expect": 1, "T": 1, "BREAK": 0}
    return pd.DataFrame([{**base, **spec} for spec in specs])


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One module cache for the tests that do not test the cache itself."""
    return tmp_path_factory.mktemp("cffi_cache")


@pytest.fixture
def faulty(cache: Path):
    executor = CffiExecutor(
        FAULTY_SOURCE,
        FAULTY_ENTRY,
        faulty_arguments,
        macros=["BREAK"],
        runtime=["mode", "expect"],
        threads="T",
        check=check_faulty,
        timing=FAST,
        timeout_s=3.0,
        cache_dir=cache,
    )
    yield executor
    executor.close()


def test_batch_with_crashes_hangs_and_compile_errors(faulty: CffiExecutor) -> None:
    batch = rows(
        {"mode": 0},
        {"mode": 1},  # segfault
        {"mode": 0},
        {"mode": 2},  # endless loop
        {"mode": 0, "n": 10},
        {"mode": 3},  # abort
        {"mode": 0, "BREAK": 1},  # does not compile
        {"mode": 5},  # wrong answer
        {"mode": 4},  # chatter on stdout
        {"mode": 0, "n": 5},
    )
    result = faulty.run(batch)
    assert len(result) == len(batch)
    assert list(result["status"]) == [
        "ok",
        "runtime_error",
        "ok",
        "timeout",
        "ok",
        "runtime_error",
        "compile_error",
        "invalid",
        "ok",
        "ok",
    ]
    assert "SIGSEGV" in result["message"][1]
    assert "SIGABRT" in result["message"][5]
    assert "faulty kernel: giving up" in result["message"][5]
    assert "no progress" in result["message"][3]
    assert "this is not C" in result["message"][6] or "error" in result["message"][6]
    assert "kernel.c" in result["message"][6]
    ok = result["status"] == "ok"
    assert result.loc[ok, "time"].gt(0).all()
    assert result.loc[~ok, "time"].isna().all()
    assert (result.loc[ok, "n_repeats"] == 3).all()
    assert all(len(json.loads(t)) == 3 for t in result.loc[ok, "raw_times"])
    assert (result.loc[~ok, "n_repeats"] == 0).all()
    # one worker at the start, one more after each crash or hang
    assert faulty.worker_starts == 4


def test_worker_is_reused_between_rows_and_batches(faulty: CffiExecutor) -> None:
    faulty.run(rows({"mode": 0}, {"mode": 0, "n": 7}))
    pid = faulty.worker.pid
    faulty.run(rows({"mode": 0}))
    assert faulty.worker.pid == pid
    assert faulty.worker_starts == 1


def test_compile_cache_is_shared_between_executors(tmp_path: Path) -> None:
    cache = tmp_path / "shared"
    options: dict[str, Any] = dict(
        macros=["BREAK"],
        runtime=["mode", "expect"],
        check=check_faulty,
        timing=TimingPolicy(warmup=0, repeats=1),
        cache_dir=cache,
    )
    batch = rows({"BREAK": 0}, {"BREAK": 1}, {"BREAK": 0, "n": 3})
    first = CffiExecutor(FAULTY_SOURCE, FAULTY_ENTRY, faulty_arguments, **options)
    with first:
        assert list(first.run(batch)["status"]) == ["ok", "compile_error", "ok"]
        assert first.compile_count == 2
        first.run(batch)
        assert first.compile_count == 2
    modules = sorted(cache.glob("*.so"))
    assert len(modules) == 1
    stamp = modules[0].stat().st_mtime_ns
    second = CffiExecutor(FAULTY_SOURCE, FAULTY_ENTRY, faulty_arguments, **options)
    with second:
        result = second.run(batch)
        assert list(result["status"]) == ["ok", "compile_error", "ok"]
        assert second.compile_count == 0
        assert second.cache.hits == 2
    assert modules[0].stat().st_mtime_ns == stamp
    # other flags: another module
    third = CffiExecutor(
        FAULTY_SOURCE, FAULTY_ENTRY, faulty_arguments, extra_compile_args=["-O1"], **options
    )
    with third:
        third.run(rows({}))
        assert third.compile_count == 1


def test_threads_are_set_by_the_glue(faulty: CffiExecutor) -> None:
    cores = len(os.sched_getaffinity(0))
    specs = [{"mode": 6, "T": t, "expect": t} for t in range(1, min(cores, 2) + 1)]
    specs.append({"mode": 6, "T": 1, "expect": 3})
    result = faulty.run(rows(*specs))
    assert list(result["status"]) == ["ok"] * (len(specs) - 1) + ["invalid"]


def test_overwritten_buffers_are_restored_before_each_run(cache: Path) -> None:
    kwargs: dict[str, Any] = dict(
        runtime=["mode", "expect"],
        macros=["BREAK"],
        check=check_faulty,
        timing=TimingPolicy(warmup=1, repeats=4),
        cache_dir=cache,
    )
    with CffiExecutor(FAULTY_SOURCE, FAULTY_ENTRY, faulty_arguments, **kwargs) as restored:
        assert restored.run(rows({"mode": 7}))["status"][0] == "ok"
    with CffiExecutor(
        FAULTY_SOURCE, FAULTY_ENTRY, faulty_arguments_unrestored, **kwargs
    ) as drifting:
        # the first run passes the check, the last one sees x incremented 5 times
        assert drifting.run(rows({"mode": 7}))["status"][0] == "invalid"


def test_text_macro_values_and_bad_tokens(faulty: CffiExecutor) -> None:
    result = faulty.run(rows({"BREAK": "0"}, {"BREAK": "1; rm -rf /"}))
    assert list(result["status"]) == ["ok", "invalid"]
    assert "plain token" in result["message"][1]
    assert macro_text("X", True) == "1"
    assert macro_text("X", 2.5) == "2.5"
    assert macro_text("X", "ikj") == "ikj"


def test_adaptive_repeats_run_more_than_the_minimum(cache: Path) -> None:
    policy = TimingPolicy(warmup=1, repeats=3, max_repeats=40, target_rel_ci=1e-9)
    with CffiExecutor(
        FAULTY_SOURCE,
        FAULTY_ENTRY,
        faulty_arguments,
        runtime=["mode", "expect"],
        macros=["BREAK"],
        timing=policy,
        cache_dir=cache,
    ) as executor:
        result = executor.run(rows({"n": 100}))
    assert result["status"][0] == "ok"
    assert result["n_repeats"][0] == 40  # an impossible target: stops at max_repeats


# ------------------------------------------------------------------- set-up and bad builders
def bad_builder(inputs: dict, rng) -> KernelCall:
    raise RuntimeError("the builder is broken")


def short_builder(inputs: dict, rng) -> KernelCall:
    return KernelCall([1, None])


def wrong_dtype_builder(inputs: dict, rng) -> KernelCall:
    import numpy as np

    return KernelCall([4, np.zeros(4, dtype=np.float32), Design("mode"), Design("expect")])


@pytest.mark.parametrize(
    ("builder", "needle"),
    [
        (bad_builder, "the builder is broken"),
        (short_builder, "2 arguments"),
        (wrong_dtype_builder, "float64"),
    ],
)
def test_builder_problems_are_runtime_errors(cache: Path, builder, needle: str) -> None:
    executor = CffiExecutor(
        FAULTY_SOURCE,
        FAULTY_ENTRY,
        builder,
        runtime=["mode", "expect"],
        macros=["BREAK"],
        cache_dir=cache,
    )
    with executor:
        result = executor.run(rows({}, {}))
        assert list(result["status"]) == ["runtime_error", "runtime_error"]
        assert needle in result["message"][0]
        assert executor.worker_starts == 1  # a Python error does not kill the worker


def test_setup_errors_raise(tmp_path: Path) -> None:
    with pytest.raises(ExecutorError, match="prototype"):
        CffiExecutor(FAULTY_SOURCE, "double faulty(int n, double *x", faulty_arguments)
    with pytest.raises(ExecutorError, match="not found"):
        CffiExecutor(tmp_path / "missing.c", FAULTY_ENTRY, faulty_arguments)
    with pytest.raises(ExecutorError, match="module-level"):
        CffiExecutor(
            FAULTY_SOURCE,
            FAULTY_ENTRY,
            lambda inputs, rng: KernelCall([]),
            cache_dir=tmp_path,
        )
    with pytest.raises(ExecutorError, match="compiler"):
        CffiExecutor(
            FAULTY_SOURCE, FAULTY_ENTRY, faulty_arguments, compiler="no-such-cc", cache_dir=tmp_path
        )
    executor = CffiExecutor(
        FAULTY_SOURCE, FAULTY_ENTRY, faulty_arguments, runtime=["mode"], cache_dir=tmp_path
    )
    with pytest.raises(ExecutorError, match="mode"):
        executor.run(pd.DataFrame({"n": [3]}))
    assert len(executor.run(pd.DataFrame({"n": [], "mode": []}))) == 0
    executor.close()
    executor.close()


def test_source_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "faulty.c"
    path.write_text(FAULTY_SOURCE)
    text, label = read_source(path)
    assert text == FAULTY_SOURCE and label == str(path)
    assert read_source(str(path))[1] == str(path)
    with CffiExecutor(
        str(path),
        FAULTY_ENTRY,
        faulty_arguments,
        runtime=["mode", "expect"],
        macros={"broken": "BREAK"},
        cache_dir=tmp_path / "cache",
    ) as executor:
        batch = rows({"broken": 0}, {"broken": 1}).drop(columns="BREAK")
        result = executor.run(batch)
    assert list(result["status"]) == ["ok", "compile_error"]
    assert "faulty.c" in result["message"][1]


def test_split_prototype() -> None:
    assert split_prototype(FAULTY_ENTRY) == ("faulty", ["n", "x", "mode", "expect"])
    assert split_prototype("void f(const double *, int)") == ("f", ["arg0", "arg1"])
    assert split_prototype("int g(void);") == ("g", [])
    with pytest.raises(ValueError):
        split_prototype("not a prototype")
