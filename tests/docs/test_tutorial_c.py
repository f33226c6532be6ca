"""docs/tutorials/c_kernel.md, run as written: the user's own ``transpose.c`` (with its
``arguments.py`` and ``transpose.toml``, the files of ``examples/c_kernel``) tuned through cffi
with a small budget, the page's ``main.c`` compiled with ``-Wall -Wextra -Werror`` against the
generated header and run, its answers ``mlkaps-gpu select``'s for the same sizes; then the
shipped ``lu`` kernel tuned (the merge tutorial continues from it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ._pages import ROOT, TUTORIALS, page_files, run_page

PAGE = TUTORIALS / "c_kernel.md"
EXAMPLE = ROOT / "examples" / "c_kernel"

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)"),
]


def _sizes(argv: list[str]) -> tuple[int, int]:
    values = dict(a.split("=") for a in argv if a.startswith(("m=", "n=")))
    return int(values["m"]), int(values["n"])


def test_the_page_shows_the_files_of_the_example() -> None:
    files = page_files(PAGE)
    for path in sorted(EXAMPLE.iterdir()):
        text = files[path.name]
        body = text.split("\n", 1)[1]  # after the page's "# file: NAME" line
        assert body == path.read_text(encoding="utf-8"), f"{path.name} differs from the page's"


@pytest.mark.integration
def test_c_kernel_tutorial_builds_and_runs_the_program(tmp_path: Path) -> None:
    steps = run_page(PAGE, tmp_path)
    (build,) = [s.argv for s in steps if s.argv[0] == "cc"]
    for flag in ("-std=c99", "-Wall", "-Wextra", "-Werror", "-lm"):
        assert flag in build, f"the page builds main.c without {flag}"
    verification = json.loads((tmp_path / "runs" / "transpose" / "verification.json").read_text())
    assert verification["mismatches"] == 0
    selected = {
        _sizes(s.argv): json.loads(s.stdout)
        for s in steps
        if "select" in s.argv and "runs/transpose" in s.argv
    }
    printed = {
        (int(s.argv[1]), int(s.argv[2])): json.loads(s.stdout)
        for s in steps
        if s.argv[0] == "./main"
    }
    assert len(printed) == 2 and printed == selected
    for config in printed.values():
        assert config["tile"] in {8, 16, 32, 64} and config["chunk"] in {1, 4, 16}
        assert config["threads"] in {1, 2}
    # the shipped kernel: the header's fallback keeps every answer valid (nb <= min(m, n))
    answers = {
        _sizes(s.argv): json.loads(s.stdout)
        for s in steps
        if "select" in s.argv and "runs/lu" in s.argv
    }
    assert len(answers) == 2 and (tmp_path / "runs" / "lu" / "lu.h").is_file()
    for size, config in answers.items():
        assert config["panel"] in {"unblocked", "recursive"}
        assert config["nb"] in {8, 16, 32, 64, 128} and config["nb"] <= min(size)
