"""Class 8: zero, negative or non-finite times from a kernel are stored as
``invalid_measurement``, never as ``ok``; the campaign (log-scale target included) finishes."""

from __future__ import annotations

import math

import pytest

from tests.hostile.user import Folder, assert_clean, cli, store_rows

pytestmark = pytest.mark.integration


def test_impossible_times_are_stored_as_invalid_measurements(folder: Folder) -> None:
    config = folder.config(
        function="impossible_times", budget=60, batch=20, sampling_extra="", kernel_extra=""
    )
    text = config.read_text() + "\n[surrogate]\nlog_target = true\n"
    config.write_text(text)
    out = folder.path / "run"
    assert_clean(cli("tune", config, "--out", out, cwd=folder.path))
    rows = store_rows(out)
    assert len(rows) == 60
    kinds = {0: "zero", 1: "negative", 2: "infinite"}
    seen = set()
    for row in rows:
        n, block, time, status, message = row[1], row[2], row[3], row[4], row[7]
        kind = kinds.get((int(n) + int(block)) % 5)
        if kind is None:
            assert status == "ok" and time > 0 and math.isfinite(time)
            continue
        seen.add(kind)
        assert status == "invalid_measurement", (n, block, status)
        assert time is None  # no value reaches the model
        assert "not a possible measurement" in message
    assert seen == set(kinds.values())
    assert (out / "hostile.h").exists()
