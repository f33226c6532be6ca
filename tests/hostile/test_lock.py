"""Class 1: one writer per campaign directory. A second writer (tune, its resume, validate,
merge, export) is refused at once with the holder's process id; readers (select) never block;
the lock dies with its holder, kill -9 included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hostile.user import (
    Folder,
    assert_clean,
    assert_refused,
    cli,
    file_digest,
    start_cli,
    store_rows,
)

pytestmark = pytest.mark.integration

HOLD = (
    "import sys, time; from mlkaps_gpu.campaign._lock import CampaignLock; "
    "CampaignLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(600)"
)


def _holder(directory: Path) -> subprocess.Popen[str]:
    """Another process holding the writer lock of ``directory``."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def _wait_for_lock(directory: Path, pid: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    lock = directory / ".lock"
    while time.monotonic() < deadline:
        if lock.exists() and lock.read_text().strip() == str(pid):
            return
        time.sleep(0.05)
    raise AssertionError(f"{pid} never took {lock}")


def test_second_tune_is_refused_and_the_first_finishes_with_its_budget(folder: Folder) -> None:
    config = folder.config(function="held", budget=40, batch=5)
    out = folder.path / "run"
    first = start_cli("tune", config, "--out", out, cwd=folder.path)
    try:
        _wait_for_lock(out, first.pid)
        second = cli("tune", config, "--out", out, cwd=folder.path)
        assert_refused(second, f"process {first.pid} is writing this campaign", str(out))
        resumed = cli("tune", config, "--out", out, "--force", cwd=folder.path)
        assert_refused(resumed, f"process {first.pid}")
        assert first.poll() is None  # the kernel holds it until released
        (folder.path / "release").touch()
        stdout, stderr = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, stdout + stderr
    rows = store_rows(out)
    assert len(rows) == 40
    assert len({row[1:3] for row in rows}) == 40  # (n, block) pairs: no batch stored twice


def test_writers_are_refused_readers_are_not(folder: Folder) -> None:
    config = folder.config(budget=30)
    out = folder.path / "run"
    assert_clean(cli("tune", config, "--out", out, cwd=folder.path))
    before, digest = store_rows(out), file_digest(out / "samples.sqlite")
    holder = _holder(out)
    try:
        for command in (
            ["tune", config, "--out", out],
            ["validate", out],
            ["merge", out, "--expert", "block=8"],
            ["export", "--targets", out, "--out", folder.path / "all.h"],
        ):
            result = cli(*command, cwd=folder.path)
            assert_refused(result, f"process {holder.pid} is writing this campaign")
        started = time.monotonic()
        answer = cli("select", out, "n=300", cwd=folder.path)
        assert_clean(answer)
        assert '"block"' in answer.stdout
        assert time.monotonic() - started < 120  # never waits for the writer
    finally:
        holder.kill()
        holder.wait()
    assert store_rows(out) == before and file_digest(out / "samples.sqlite") == digest
    assert not (folder.path / "all.h").exists()


def test_the_lock_dies_with_a_killed_holder(folder: Folder) -> None:
    config = folder.config(budget=20)
    out = folder.path / "run"
    out.mkdir()
    holder = _holder(out)
    refused = cli("tune", config, "--out", out, cwd=folder.path)
    assert_refused(refused, f"process {holder.pid}")
    assert folder.calls == 0  # refused before any measurement
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert_clean(cli("tune", config, "--out", out, cwd=folder.path))
    assert len(store_rows(out)) == 20
