"""docs/tutorials/merge.md, run as written after the C kernel tutorial (slow: about a thousand
kernel measurements): validate and merge against fixed and size-dependent experts, and the
no-regression rule holds for what ships."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ._pages import TUTORIALS, run_page, split_environment

pytestmark = [
    pytest.mark.slow,
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)"),
    pytest.mark.integration,
]


def test_merge_tutorial_ships_only_without_regression(tmp_path: Path) -> None:
    run_page(TUTORIALS / "c_kernel.md", tmp_path)
    steps = run_page(TUTORIALS / "merge.md", tmp_path)
    campaign = tmp_path / "runs" / "lu"
    run = [split_environment(s.argv)[1] for s in steps]
    assert [argv[1] for argv in run if argv[0] == "mlkaps-gpu"] == ["validate", "merge", "merge"]
    validation = json.loads((campaign / "validation" / "summary.json").read_text())
    assert validation["points"] == 9 and validation["repeats"] == 5
    summary = json.loads((campaign / "merge" / "summary.json").read_text())
    assert summary["expert"] == "expert:lu_expert"  # the last merge's expert
    last = steps[-1].stdout
    if summary["shipped"] == "merged":
        after = summary["after"]
        assert after["regressions"]["count"] == 0 and after["geomean_speedup"] >= 1.0
        assert (campaign / summary["header"]).is_file()
        assert "the expert ships" not in last
    else:
        assert summary["shipped"] == "expert" and summary["header"] is None
        assert (campaign / summary["rejected_header"]).is_file()
        assert "the expert ships" in last
