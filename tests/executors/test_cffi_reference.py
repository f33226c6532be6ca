"""A C kernel whose builder and check are given by reference (``file.py:function``, a file on no
import path): loaded in the campaign's process to report a mistake early, and again in the
worker process; a user's kernel goes through ``BuiltinKernel.make_executor`` like a shipped
one."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from mlkaps_gpu.executors import CffiExecutor, ExecutorError, TimingPolicy
from mlkaps_gpu.kernels import user_c_kernel

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler"),
]

SOURCE = """\
/* x *= a, UNROLL elements at a time; UNROLL == 3 forgets the last element (a wrong answer). */
double scale(int n, double a, double *x)
{
    double sum = 0.0;
    int stop = UNROLL == 3 ? n - 1 : n;
    for (int i = 0; i < stop; i += UNROLL)
        for (int j = i; j < i + UNROLL && j < stop; ++j) {
            x[j] *= a;
            sum += x[j];
        }
    return sum;
}
"""
PROTOTYPE = "double scale(int n, double a, double *x)"

ARGUMENTS = """
import numpy as np

from mlkaps_gpu.executors import Design, KernelCall


def build(inputs, rng):
    return KernelCall(args=[inputs["n"], Design("a"), rng.random(inputs["n"])], overwritten=["x"])


def check(inputs, outputs):
    expected = inputs["x"] * inputs["a"]
    return np.allclose(outputs["x"], expected) and np.isclose(outputs["return"], expected.sum())
"""
REFUSE_ALL = """

def check(inputs, outputs):
    return False
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "user"
    path.mkdir()
    (path / "scale.c").write_text(SOURCE)
    (path / "scale_args.py").write_text(textwrap.dedent(ARGUMENTS))
    return path


def test_builder_and_check_by_reference_run_in_the_worker(folder: Path, tmp_path: Path) -> None:
    kernel = user_c_kernel(
        folder / "scale.c",
        PROTOTYPE,
        f"{folder / 'scale_args.py'}:build",
        check=f"{folder / 'scale_args.py'}:check",
        macros={"unroll": "UNROLL"},
        runtime=["a"],
        extra_compile_args=["-O1"],
    )
    assert kernel.source_path == folder / "scale.c" and kernel.entry == PROTOTYPE
    rows = pd.DataFrame({"n": [100, 101, 100], "unroll": [1, 4, 3], "a": [2.0, 0.5, 2.0]})
    cache = tmp_path / "cache"
    with kernel.make_executor(timing=TimingPolicy(warmup=0, repeats=2), cache_dir=cache) as ex:
        assert isinstance(ex, CffiExecutor)
        assert ex.cache.compile_args == ["-O1"]
        result = ex.run(rows)
    assert list(result["status"]) == ["ok", "ok", "invalid"], list(result["message"])
    assert "check failed" in result["message"][2]


def test_a_relative_reference_is_relative_to_the_working_directory(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    with CffiExecutor(
        folder / "scale.c",
        PROTOTYPE,
        "scale_args.py:build",
        macros={"unroll": "UNROLL"},
        runtime=["a"],
        cache_dir=tmp_path / "cache",
        timing=TimingPolicy(warmup=0, repeats=1),
    ) as executor:
        monkeypatch.chdir(tmp_path)  # the worker starts elsewhere: the path was resolved
        result = executor.run(pd.DataFrame({"n": [10], "unroll": [2], "a": [3.0]}))
    assert list(result["status"]) == ["ok"], list(result["message"])


@pytest.mark.parametrize(
    ("builder", "fragments"),
    [
        ("scale_args.py:bulid", ["scale_args.py", "no function 'bulid'", "build, check"]),
        ("missing_args.py:build", ["function file not found", "missing_args.py"]),
        ("no_such_module_xyz:build", ["cannot import no_such_module_xyz"]),
        ("scale_args.py", ["'module:function' or 'file.py:function'"]),
    ],
)
def test_a_builder_that_cannot_be_loaded_is_named(
    builder: str, fragments: list[str], folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    with pytest.raises(ExecutorError) as caught:
        CffiExecutor(folder / "scale.c", PROTOTYPE, builder, macros={"unroll": "UNROLL"})
    for fragment in fragments:
        assert fragment in str(caught.value), str(caught.value)


def test_two_folders_builders_and_checks_of_one_name_stay_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two folders with a ``scale_args.py`` each (the second's check refuses everything), used
    one after the other in one process: each executor's worker loads its own folder's, by file
    reference and by module reference (the second folder first on ``sys.path``)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "scale_args", raising=False)
    folders = {}
    for name, arguments in [("a", ARGUMENTS), ("b", ARGUMENTS + REFUSE_ALL)]:
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "scale_args.py").write_text(textwrap.dedent(arguments))
    rows = pd.DataFrame({"n": [10], "unroll": [2], "a": [3.0]})

    def status(builder: str, check: str) -> str:
        with CffiExecutor(
            SOURCE,
            PROTOTYPE,
            builder,
            check=check,
            macros={"unroll": "UNROLL"},
            runtime=["a"],
            cache_dir=tmp_path / "cache",
            timing=TimingPolicy(warmup=0, repeats=1),
        ) as executor:
            return str(executor.run(rows)["status"].iloc[0])

    for name, expected in [("a", "ok"), ("b", "invalid"), ("a", "ok")]:
        monkeypatch.chdir(folders[name])
        assert status("scale_args.py:build", "scale_args.py:check") == expected, name
    for name in ("a", "b"):  # b first on sys.path, then a
        monkeypatch.syspath_prepend(str(folders[name]))
    for working_folder in (folders["b"], tmp_path):
        monkeypatch.chdir(working_folder)
        assert status("scale_args:build", "scale_args:check") == "invalid", working_folder
