"""docs/tutorials/c_kernel.md, run as written: the shipped ``lu`` kernel tuned through cffi with
a small budget, then the page's ``main.c`` compiled with ``-Wall -Wextra -Werror`` against the
generated header and run; its answers are ``mlkaps-gpu select``'s for the same sizes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ._pages import TUTORIALS, run_page

PAGE = TUTORIALS / "c_kernel.md"

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)"),
]


def _sizes(argv: list[str]) -> tuple[int, int]:
    values = dict(a.split("=") for a in argv if a.startswith(("m=", "n=")))
    return int(values["m"]), int(values["n"])


def test_c_kernel_tutorial_builds_and_runs_the_program(tmp_path: Path) -> None:
    steps = run_page(PAGE, tmp_path)
    (build,) = [s.argv for s in steps if s.argv[0] == "cc"]
    for flag in ("-std=c99", "-Wall", "-Wextra", "-Werror", "-lm"):
        assert flag in build, f"the page builds main.c without {flag}"
    selected = {_sizes(s.argv): json.loads(s.stdout) for s in steps if "select" in s.argv}
    printed = {
        (int(s.argv[1]), int(s.argv[2])): json.loads(s.stdout)
        for s in steps
        if s.argv[0] == "./main"
    }
    assert len(printed) == 2 and printed == selected
    for config in printed.values():
        assert config["panel"] in {"unblocked", "recursive"}
        assert config["nb"] in {8, 16, 32, 64, 128}
    # The header's fallback keeps every answer valid: nb <= min(m, n) at every size asked.
    assert all(c["nb"] <= min(size) for size, c in printed.items())
