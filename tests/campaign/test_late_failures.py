"""Configurations that used to fail only after the budget was measured are refused up front.

Each bad configuration goes to ``load_config``, to ``mlkaps-gpu check`` and to ``mlkaps-gpu
tune`` (through ``mlkaps_gpu.cli.main``): each exits 2 with one line naming the file and the key,
no traceback, nothing is created in ``--out`` and the kernel is never called (it writes a marker
file when it is). The same holds for every configuration of the fuzz corpus that is refused.
"""

from __future__ import annotations

import random
import sys
import textwrap
from pathlib import Path

import pytest

from mlkaps_gpu.campaign import ConfigError, load_config, prepare
from mlkaps_gpu.cli._main import main
from mlkaps_gpu.testing import random_config
from tests.toy import corpus

KERNEL = '''
import os

MARKER = {marker!r}


def model(row):
    """A kernel that leaves a trace: the test asserts it was never called."""
    with open(MARKER, "a") as handle:
        handle.write("called\\n")
    return float(row["block"]) / float(row["n"])
'''

GOOD = """\
[kernel]
executor = "python"
function = "late_marker_kernel:model"

[inputs]
n = { type = "int", range = [16, 1024] }

[design]
block = { type = "int", values = [8, 16, 32] }
variant = { type = "categorical", values = ["fast", "slow"] }
constraints = ["block <= n"]

[sampling]
budget = 10

[optimization]
grid = 4

[trees]
max_depth = "auto"
"""


def _replace(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new)


def _rename(name: str) -> str:
    """GOOD with the input ``n`` renamed (declaration and constraint)."""
    text = _replace('n = { type = "int"', f'"{name}" = {{ type = "int"')
    return text.replace('"block <= n"', '"block >= 1"')


#: name -> (configuration text, fragments the one-line message must contain)
LATE: dict[str, tuple[str, list[str]]] = {
    # the late failures listed in issue 17
    "prefix_int": (GOOD + 'prefix = "int"\n', ["[trees] prefix", "'int'", "keyword"]),
    "prefix_main": (GOOD + 'prefix = "main"\n', ["[trees] prefix", "'main'", "entry point"]),
    "command_without_command": (
        _replace(
            'executor = "python"\nfunction = "late_marker_kernel:model"', 'executor = "command"'
        ),
        ["[kernel] command", "missing", 'executor = "command" needs it'],
    ),
    "command_unknown_field": (
        _replace(
            'executor = "python"\nfunction = "late_marker_kernel:model"',
            f'executor = "command"\ncommand = ["{sys.executable}", "-c", "print(1)", "{{m}}"]',
        ),
        ["[kernel] command", "{m} is not a parameter"],
    ),
    "command_program_missing": (
        _replace(
            'executor = "python"\nfunction = "late_marker_kernel:model"',
            'executor = "command"\ncommand = ["no-such-program-here", "{n}"]',
        ),
        ["[kernel] command[0]", "not found"],
    ),
    "lightgbm_unknown_parameter": (
        GOOD + "[surrogate]\nparams = { num_leafs = 8 }\n",
        ["[surrogate] params.num_leafs", "not a LightGBM parameter"],
    ),
    "lightgbm_bad_value": (
        GOOD + "[surrogate]\nparams = { learning_rate = 0.0 }\n",
        ["[surrogate] params.learning_rate", "0.0"],
    ),
    "lightgbm_value_refused_by_lightgbm": (
        GOOD + '[surrogate]\nparams = { boosting = "rf" }\n',
        ["[surrogate] params", "refused by LightGBM"],
    ),
    "lightgbm_reserved": (
        GOOD + "[surrogate]\nparams = { n_estimators = 5 }\n",
        ["[surrogate] params.n_estimators", "set by the tool"],
    ),
    "grid_unknown_input": (
        _replace("grid = 4", "grid = { m = 4 }"),
        ["[optimization] grid.m", "not an input"],
    ),
    "depth_tolerance_nan": (
        GOOD + "depth_tolerance = nan\n",
        ["[trees] depth_tolerance", "nan", "finite number"],
    ),
    "depth_tolerance_negative": (
        GOOD + "depth_tolerance = -0.5\n",
        ["[trees] depth_tolerance", "-0.5"],
    ),
    "depth_tolerance_ignored": (
        _replace('max_depth = "auto"', "max_depth = 4\ndepth_tolerance = 0.1"),
        ["[trees] depth_tolerance", "applies only to max_depth"],
    ),
    # identifier classes (issue 19, 5)
    "keyword_name": (_rename("double"), ["[inputs] double", "keyword"]),
    "libm_name_pow": (_rename("pow"), ["[inputs] pow", "math.h"]),
    "libm_name_floor": (_rename("floor"), ["[inputs] floor", "math.h"]),
    "libm_name_fabs": (_rename("fabs"), ["[inputs] fabs", "math.h"]),
    "macro_fp_nan": (_rename("FP_NAN"), ["[inputs] FP_NAN", "macro"]),
    "macro_nan": (_rename("NAN"), ["[inputs] NAN", "macro"]),
    "macro_infinity": (_rename("INFINITY"), ["[inputs] INFINITY", "macro"]),
    "macro_eof": (_rename("EOF"), ["[inputs] EOF", "macro"]),
    "macro_null": (_rename("NULL"), ["[inputs] NULL", "macro"]),
    "name_main": (_rename("main"), ["[inputs] main", "entry point"]),
    "leading_underscore": (_rename("_n"), ["[inputs] _n", "starts with '_'"]),
    "store_column_status": (_rename("status"), ["[inputs] status", "store's own column"]),
    "store_column_n_repeats": (_rename("n_repeats"), ["[inputs] n_repeats", "store's own column"]),
    "store_column_raw_times": (_rename("raw_times"), ["[inputs] raw_times", "store's own column"]),
    "store_column_batch_upper": (_rename("Batch"), ["[inputs] Batch", "store's own column"]),
    "equal_up_to_case": (
        _replace("block = {", 'Block = { type = "int", values = [1] }\nblock = {'),
        ["[design] block", "'Block' and 'block'", "case"],
    ),
    "nfkc_look_alike": (_rename("ｎ"), ["[inputs] ｎ", "NFKC", "'n'"]),
    "non_ascii": (_rename("größe"), ["[inputs] größe", "non-ASCII"]),
    "objective_store_column": (
        GOOD + '[objectives]\nmessage = "minimize"\n',
        ["[objectives] message", "store's own column"],
    ),
    # literals (issue 19, 5)
    "literal_not_finite_in_c": (
        _replace('"block <= n"', '"block <= n * 1e400"'),
        ["[design] constraints[0]", "1e400", "finite"],
    ),
    "huge_integer_literal": (
        _replace('"block <= n"', '"block <= n + 1' + "0" * 400 + '"'),
        ["[design] constraints[0]", "finite"],
    ),
    "trigraph_in_constraint": (
        _replace('"block <= n"', "\"variant != 'a??/'\""),
        ["[design] constraints[0]", "trigraph"],
    ),
    "trigraph_in_value": (
        _replace('values = ["fast", "slow"]', 'values = ["fast??=", "slow"]'),
        ["[design] variant.values[0]", "trigraph"],
    ),
    # misread settings (issue 19, 9)
    "log_no": (
        _replace("range = [16, 1024] }", 'range = [16, 1024], log = "no" }'),
        ["[inputs] n.log", '"no"', "true or false"],
    ),
    "budget_float": (_replace("budget = 10", "budget = 1e3"), ["[sampling] budget", "1000.0"]),
    "ignored_sampler_setting": (
        _replace("budget = 10", 'budget = 10\nmethod = "lhs"\nsub_sampler = "hvs"'),
        ["[sampling] sub_sampler", "ga_adaptive"],
    ),
    "ignored_executor_key": (
        _replace("budget = 10", "budget = 10\n[execution]\nworkers = 4"),
        ["[execution] workers", "dask"],
    ),
    "other_executors_key": (
        _replace(
            'function = "late_marker_kernel:model"',
            'function = "late_marker_kernel:model"\nbuiltin = "lu"',
        ),
        ["[kernel] builtin", 'not read by executor = "python"'],
    ),
    # sizes (issue 19, 10)
    "n_estimators_huge": (
        GOOD + "[surrogate]\nn_estimators = 1000000000\n",
        ["[surrogate] n_estimators", "100000"],
    ),
    "repeats_huge": (
        _replace("function = ", "repeats = 1000000000\nfunction = "),
        ["[kernel] repeats", "10000"],
    ),
    "budget_huge": (_replace("budget = 10", "budget = 100000000"), ["[sampling] budget"]),
    "grid_points_huge": (
        _replace("[design]", '[inputs.m]\ntype = "float"\nrange = [0.0, 1.0]\n\n[design]').replace(
            "grid = 4", "grid = 2000"
        ),
        ["[optimization] grid", "grid points"],
    ),
    "max_depth_huge": (_replace('max_depth = "auto"', "max_depth = 1000"), ["[trees] max_depth"]),
    "int64_overflow": (
        _replace("range = [16, 1024]", "range = [16, 99999999999999999999]"),
        ["[inputs] n.range[1]"],
    ),
}


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The marker the kernel writes when called; the kernel module is importable."""
    folder = tmp_path / "kernel"
    folder.mkdir()
    path = tmp_path / "kernel_was_called"
    (folder / "late_marker_kernel.py").write_text(textwrap.dedent(KERNEL.format(marker=str(path))))
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop("late_marker_kernel", None)
    return path


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _assert_refused_everywhere(
    text: str, fragments: list[str], folder: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    """load_config (with prepare, which builds the executor and imports user code), check and
    tune refuse ``text`` alike; returns the message."""
    config = folder / "bad.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        prepare(load_config(config))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("bad.toml: "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    line = f"mlkaps-gpu: error: {' '.join(message.split())}"  # the CLI's one line
    code, out, err = _cli(["check", str(config)], capsys)
    assert code == 2 and out == ""
    assert err.strip() == line, err
    out_dir = folder / "campaign"
    code, out, err = _cli(["--quiet", "tune", str(config), "--out", str(out_dir)], capsys)
    assert code == 2, err
    assert err.strip() == line, err
    assert "Traceback" not in err
    assert not out_dir.exists()
    assert not marker.exists()
    return message


def test_the_good_configuration_passes_check(
    tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "good.toml"
    config.write_text(GOOD, encoding="utf-8")
    code, out, err = _cli(["check", str(config)], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("OK good.toml: ") and out.count("\n") == 1
    assert not marker.exists()


@pytest.mark.parametrize("case", sorted(LATE))
def test_late_failure_is_refused_before_anything_runs(
    case: str, tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, fragments = LATE[case]
    _assert_refused_everywhere(text, fragments, tmp_path, marker, capsys)


def test_out_naming_a_regular_file_fails_cleanly(
    tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "good.toml"
    config.write_text(GOOD, encoding="utf-8")
    regular = tmp_path / "results.txt"
    regular.write_text("keep me")
    for out in (regular, regular / "below"):
        code, _, err = _cli(["--quiet", "tune", str(config), "--out", str(out)], capsys)
        assert code == 2
        assert "is not a directory" in err and str(regular) in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert regular.read_text() == "keep me"
    assert not marker.exists()


# ----------------------------------------------------------------- a user's C source (cffi)
C_SOURCE = """\
#ifndef BLOCK
#define BLOCK 8
#endif
void saxpy(int n, double a, const double *x, double *y)
{
    for (int i = 0; i < n; i += BLOCK)
        for (int j = i; j < i + BLOCK && j < n; ++j)
            y[j] += a * x[j];
}
"""

C_BUILDER = '''
import numpy as np

from mlkaps_gpu.executors import KernelCall

MARKER = {marker!r}


def build(inputs, rng):
    """Leaves a trace: the test asserts it was never called."""
    with open(MARKER, "a") as handle:
        handle.write("called\\n")
    n = inputs["n"]
    return KernelCall(args=[n, 2.0, rng.random(n), np.zeros(n)], overwritten=["y"])
'''

GOOD_C = (
    _replace(
        'executor = "python"\nfunction = "late_marker_kernel:model"',
        'executor = "cffi"\n'
        'source = "saxpy.c"\n'
        'prototype = "void saxpy(int n, double a, const double *x, double *y)"\n'
        'builder = "saxpy_args.py:build"\n'
        'macros = { block = "BLOCK" }\n'
        'runtime = ["variant"]',
    )
    .replace('values = ["fast", "slow"]', "values = [0, 1]")
    .replace("categorical", "int")
)


def _c(old: str, new: str) -> str:
    assert old in GOOD_C, old
    return GOOD_C.replace(old, new)


#: name -> (configuration text, fragments the one-line message must contain)
LATE_C: dict[str, tuple[str, list[str]]] = {
    "source_missing": (
        _c('source = "saxpy.c"', 'source = "kernels/missing.c"'),
        ["[kernel] source", "kernels/missing.c", "C source file not found"],
    ),
    "source_variable_unset": (
        _c('source = "saxpy.c"', 'source = "${MLKAPS_NO_SUCH_VARIABLE}/saxpy.c"'),
        ["[kernel] source", "MLKAPS_NO_SUCH_VARIABLE is not set"],
    ),
    "builtin_and_source": (
        _c('source = "saxpy.c"', 'builtin = "matsum"\nsource = "saxpy.c"'),
        ["[kernel] source", "`builtin` or `source`, not both"],
    ),
    "neither_builtin_nor_source": (
        _c('source = "saxpy.c"\n', ""),
        ["[kernel] builtin", "missing", "`builtin` (a shipped kernel) or `source`"],
    ),
    "prototype_missing": (
        _c('prototype = "void saxpy(int n, double a, const double *x, double *y)"\n', ""),
        ["[kernel] prototype", "missing"],
    ),
    "prototype_unknown_type": (
        _c("const double *x", "const vector *x"),
        ["[kernel] prototype", "cannot parse the entry prototype"],
    ),
    "prototype_not_a_function": (
        _c('"void saxpy(int n, double a, const double *x, double *y)"', '"saxpy"'),
        ["[kernel] prototype", "not a C function prototype"],
    ),
    "prototype_reserved_name": (
        _c("void saxpy(", "void main("),
        ["[kernel] prototype", "entry function 'main'", "entry point"],
    ),
    "builder_function_missing": (
        _c('"saxpy_args.py:build"', '"saxpy_args.py:bulid"'),
        ["[kernel] builder", "saxpy_args.py", "no function 'bulid'", "build"],
    ),
    "builder_file_missing": (
        _c('"saxpy_args.py:build"', '"saxpy_arguments.py:build"'),
        ["[kernel] builder", "saxpy_arguments.py", "not found"],
    ),
    "builder_module_missing": (
        _c('"saxpy_args.py:build"', '"no_such_module_xyz:build"'),
        ["[kernel] builder", "cannot import no_such_module_xyz", "'no_such_module_xyz:build'"],
    ),
    "builder_not_a_reference": (
        _c('"saxpy_args.py:build"', '"saxpy_args.py"'),
        ["[kernel] builder", "'module:function' or 'file.py:function'"],
    ),
    "check_function_missing": (
        _c(
            'builder = "saxpy_args.py:build"',
            'builder = "saxpy_args.py:build"\ncheck = "saxpy_args.py:ok"',
        ),
        ["[kernel] check", "saxpy_args.py", "no function 'ok'"],
    ),
    "macro_unknown_design_parameter": (
        _c('macros = { block = "BLOCK" }', 'macros = { blocks = "BLOCK" }'),
        ["[kernel] macros", "'blocks' is not a design parameter", "block, variant"],
    ),
    "runtime_unknown_design_parameter": (
        _c('runtime = ["variant"]', 'runtime = ["variant", "n"]'),
        ["[kernel] runtime", "'n' is not a design parameter"],
    ),
    "threads_unknown_design_parameter": (
        _c('runtime = ["variant"]', 'runtime = ["variant"]\nthreads = "T"'),
        ["[kernel] threads", "'T' is not a design parameter"],
    ),
    "design_parameter_not_passed": (
        _c('runtime = ["variant"]', "runtime = []"),
        ["[kernel] runtime", "'variant' does not reach the kernel"],
    ),
    "design_parameter_passed_twice": (
        _c('runtime = ["variant"]', 'runtime = ["variant", "block"]'),
        ["[kernel] runtime", "'block' is passed to the kernel twice"],
    ),
    "macro_not_an_identifier": (
        _c('{ block = "BLOCK" }', '{ block = "2BLOCK" }'),
        ["[kernel] macros.block", "'2BLOCK' is not a C identifier"],
    ),
    "macro_reserved": (
        _c('{ block = "BLOCK" }', '{ block = "NULL" }'),
        ["[kernel] macros.block", "'NULL'"],
    ),
    "source_key_with_builtin": (
        _c('source = "saxpy.c"', 'builtin = "matsum"'),
        ["[kernel] ", "only with `source`"],
    ),
    "source_key_with_python": (
        _replace("function = ", 'macros = ["block"]\nfunction = '),
        ["[kernel] macros", 'not read by executor = "python" (only by cffi)'],
    ),
}


@pytest.fixture
def c_folder(tmp_path: Path, marker: Path) -> Path:
    """A user's folder: saxpy.c and its builder (which writes the marker when called)."""
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "saxpy.c").write_text(C_SOURCE)
    (folder / "saxpy_args.py").write_text(textwrap.dedent(C_BUILDER.format(marker=str(marker))))
    return folder


def test_the_good_c_source_configuration_passes_check(
    c_folder: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = c_folder / "good.toml"
    config.write_text(GOOD_C, encoding="utf-8")
    code, out, err = _cli(["check", str(config)], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("OK good.toml: ") and "cffi kernel" in out
    assert not marker.exists()


@pytest.mark.parametrize("case", sorted(LATE_C))
def test_c_source_mistake_is_refused_before_anything_runs(
    case: str, c_folder: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, fragments = LATE_C[case]
    _assert_refused_everywhere(text, fragments, c_folder, marker, capsys)


#: Seeds of the fuzz corpus fed to all three entry points.
FUZZ_SEEDS = range(600)


@pytest.mark.property
def test_fuzz_corpus_is_refused_alike_and_before_anything_runs(
    tmp_path: Path, marker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every configuration of the corpus: load_config and check agree; each refused one is
    refused by tune with the same line, before anything is created or run. (The whole corpus
    with the ci-full profile, a quarter of it in the default run.)"""
    refused = accepted = 0
    seeds = corpus(FUZZ_SEEDS)
    for seed in seeds:
        text = random_config(random.Random(seed)).replace("math:hypot", "late_marker_kernel:model")
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        config = folder / "bad.toml"
        config.write_text(text, encoding="utf-8")
        try:
            load_config(config)
        except ConfigError as error:
            _assert_refused_everywhere(text, [], folder, marker, capsys)
            assert str(error).startswith("bad.toml: ")
            refused += 1
            continue
        code, out, err = _cli(["check", str(config)], capsys)
        assert (code, err) == (0, ""), (seed, err)
        accepted += 1
    assert refused > len(seeds) / 6 and accepted > len(seeds) / 12, (refused, accepted)
    assert not marker.exists()
