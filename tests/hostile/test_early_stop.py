"""Class 6: a kernel that fails every time stops the campaign after its first N measurements
(``[sampling] stop_after_failures``, default 20) with the first error shown, instead of
spending the whole budget; the failed rows stay stored and a fixed kernel resumes."""

from __future__ import annotations

import pytest

from tests.hostile.user import Folder, assert_clean, assert_refused, cli, store_rows

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("function", "first_error"),
    [
        ("always_fails", "runtime_error: RuntimeError: the device is not there"),
        ("always_nan", "invalid_measurement: time = nan is not a possible measurement"),
        ("always_segfaults", "SIGSEGV"),
    ],
)
def test_a_kernel_that_always_fails_stops_early(
    folder: Folder, function: str, first_error: str
) -> None:
    config = folder.config(function=function, budget=500, batch=10)
    out = folder.path / "run"
    result = cli("tune", config, "--out", out, cwd=folder.path)
    assert_refused(result, "the first 20 measurements of this run all failed", first_error)
    assert "fix it, then run the same command" in result.stderr
    assert len(store_rows(out)) == 20 and folder.calls == 20  # not 500


def test_the_limit_is_configurable_and_a_fixed_kernel_resumes(folder: Folder) -> None:
    broken = folder.config(
        function="always_fails", budget=40, batch=4, sampling_extra="stop_after_failures = 8\n"
    )
    out = folder.path / "run"
    assert_refused(cli("tune", broken, "--out", out, cwd=folder.path), "first 8 measurements")
    stored = store_rows(out)
    assert len(stored) == 8
    fixed = folder.config(
        "fixed.toml", function="model", budget=40, batch=4,
        sampling_extra="stop_after_failures = 8\n",
    )  # fmt: skip
    assert_clean(cli("tune", fixed, "--out", out, "--force", cwd=folder.path))
    rows = store_rows(out)
    assert len(rows) == 40 and rows[:8] == stored
    assert [r[4] for r in rows[8:]] == ["ok"] * 32


def test_zero_never_stops(folder: Folder) -> None:
    config = folder.config(
        function="always_fails", budget=30, batch=10, sampling_extra="stop_after_failures = 0\n"
    )
    out = folder.path / "run"
    result = cli("tune", config, "--out", out, cwd=folder.path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "successful measurements" in result.stderr  # nothing to learn, after the budget
    assert len(store_rows(out)) > 20  # the sampling budget was spent, not cut at 20
