"""docs/tutorials/architectures.md, run as written with the replay data (skipped without
``MLKAPS_GPU_DATA``): two single-GPU campaigns, one exported header, and the page's C program
built for each target; its compile-time and run-time answers are ``mlkaps-gpu select``'s."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ._pages import TUTORIALS, run_page

PAGE = TUTORIALS / "architectures.md"
SELECT = ["mlkaps-gpu", "select"]
DATA = os.environ.get("MLKAPS_GPU_DATA", "")

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)"),
    pytest.mark.skipif(
        not (Path(DATA) / "convolution_6gpu").is_dir(),
        reason="MLKAPS_GPU_DATA (replay data) is not set",
    ),
    pytest.mark.integration,
]


def test_architectures_tutorial_exports_one_header_for_both(tmp_path: Path) -> None:
    steps = run_page(PAGE, tmp_path)
    header = (tmp_path / "convolution.h").read_text()
    assert "MLKAPS_TARGET_A100" in header and "MLKAPS_TARGET_W6600" in header
    selected = {
        s.argv[2].split("/")[-1]: json.loads(s.stdout) for s in steps if s.argv[:2] == SELECT
    }
    builds = [s.argv for s in steps if s.argv[0] == "cc"]
    assert len(builds) == 2 and all("-Werror" in b and "-std=c99" in b for b in builds)
    printed = {" ".join(s.argv): json.loads(s.stdout) for s in steps if s.argv[0][:2] == "./"}
    assert printed == {
        "./target_a100": selected["A100"],
        "./target_w6600": selected["W6600"],
        "./target_a100 W6600": selected["W6600"],
    }
