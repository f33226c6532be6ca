"""docs/tutorials/ask_tell.md, run as written: the campaign file in a fresh folder, the ask / tell
loop and the tuning from Python objects; both end in a verified header."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ._pages import TUTORIALS, blocks, run_python, write_files

PAGE = TUTORIALS / "ask_tell.md"

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)"),
    pytest.mark.integration,
]


def test_ask_tell_tutorial_runs(tmp_path: Path) -> None:
    write_files(PAGE, tmp_path)
    page = blocks(PAGE)
    loop, objects = [b for b in page if b.lang == "python" and b.file_name is None]
    assert "outside.h" in run_python(loop, tmp_path)
    assert json.loads((tmp_path / "run" / "verification.json").read_text())["mismatches"] == 0
    assert "objects.h" in run_python(objects, tmp_path)
    assert (
        json.loads((tmp_path / "run_objects" / "verification.json").read_text())["mismatches"] == 0
    )
