"""docs/tutorials/python_kernel.md, run as written: its files in a fresh folder, its commands in
order (check, tune with a small budget, select), then its Python block; the trees' answers in
Python are the compiled header's answers from ``mlkaps-gpu select``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ._pages import TUTORIALS, blocks, mlkaps_gpu_process, run_page, run_python, write_files

PAGE = TUTORIALS / "python_kernel.md"

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)"),
    pytest.mark.integration,
]


def test_python_kernel_tutorial_runs(tmp_path: Path) -> None:
    steps = run_page(PAGE, tmp_path)
    assert (tmp_path / "runs" / "smooth" / "smooth.h").is_file()
    assert steps[0].argv[-2:] == ["check", "campaign.toml"]
    assert steps[0].stdout.startswith("OK campaign.toml")
    answers = {}
    for step in steps:
        if "select" in step.argv:
            inputs = " ".join(step.argv[step.argv.index("select") + 2 :])
            answers[inputs] = json.loads(step.stdout)["method"]
    assert len(answers) == 3 and set(answers.values()) <= {"direct", "fft", "overlap_add"}
    (python,) = [b for b in blocks(PAGE) if b.lang == "python" and b.file_name is None]
    printed = run_python(python, tmp_path)
    from_trees = dict(re.findall(r"^(n=\d+ window=\d+): (\w+)$", printed, re.MULTILINE))
    assert from_trees == answers, printed


def test_the_tutorial_files_tune_from_another_directory_without_pythonpath(tmp_path: Path) -> None:
    """Issue 21, Done when 1: the page's campaign.toml and kernels.py copied to a folder, tuned
    by a new process started in another folder, with no PYTHONPATH: exit 0, header verified."""
    user = tmp_path / "user"
    write_files(PAGE, user)
    assert {p.name for p in user.iterdir()} >= {"campaign.toml", "kernels.py"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = Path("..") / "user" / "campaign.toml"
    done = mlkaps_gpu_process(
        "--quiet", "tune", config, "--out", "run", cwd=elsewhere, cache=tmp_path / "cache"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    verification = json.loads((elsewhere / "run" / "verification.json").read_text())
    assert verification["mismatches"] == 0 and verification["verified_inputs"] > 0
    assert (elsewhere / "run" / "smooth.h").is_file()
