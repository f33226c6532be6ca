"""Python kernels given by reference run in a worker process: crashes, exits, hangs, memory
hogs and forked children end there, each row gets the right status, the next row a new worker;
``file.py:function`` loads without PYTHONPATH, with clear errors when it cannot."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from mlkaps_gpu.executors import ExecutorError, PythonExecutor

KERNELS = """
import os
import signal
import sys
import time

def ok(row):
    return float(row["n"])

def timed(n):
    time.sleep(0.001 * n)

def segfault(row):
    os.kill(os.getpid(), signal.SIGSEGV)

def exit_now(row):
    os._exit(3)

def hang(row):
    time.sleep(600)

def hog(row):
    blocks = []
    while True:
        blocks.append(bytearray(32 << 20))

def fork_and_hang(row):
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
    with open(row["pid_file"], "w") as handle:
        handle.write(str(child))
    time.sleep(600)

def noisy(row):
    print("to stdout", flush=True)
    os.write(1, b"raw fd 1 ")
    print("to stderr", file=sys.stderr)
    return 2.0

def by_row(row):
    kind = row["kind"]
    if kind == "segfault":
        segfault(row)
    if kind == "exit":
        exit_now(row)
    if kind == "hang":
        hang(row)
    if kind == "hog":
        hog(row)
    return 1.0
"""


@pytest.fixture
def kernels(tmp_path: Path) -> Path:
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "kernels.py").write_text(textwrap.dedent(KERNELS))
    (folder / "broken.py").write_text("def run(row):\n    return (\n")
    assert str(folder) not in sys.path and str(folder) not in os.environ.get("PYTHONPATH", "")
    return folder


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_file_reference_loads_without_pythonpath(kernels: Path) -> None:
    executor = PythonExecutor("kernels.py:ok", base=kernels)
    try:
        result = executor.run(pd.DataFrame({"n": [3, 5]}))
        assert result["status"].tolist() == ["ok", "ok"]
        assert result["time"].tolist() == [3.0, 5.0]
        assert executor.isolate and executor.worker_starts == 1
    finally:
        executor.close()


def test_measure_mode_times_in_the_worker(kernels: Path) -> None:
    executor = PythonExecutor("kernels.py:timed", base=kernels, measure=True, repeats=3)
    try:
        result = executor.run(pd.DataFrame({"n": [1, 20]}))
        assert result["status"].tolist() == ["ok", "ok"]
        assert result["n_repeats"].tolist() == [3, 3]
        assert result["time"].iloc[1] > result["time"].iloc[0] > 0
    finally:
        executor.close()


@pytest.mark.parametrize(
    ("reference", "fragments"),
    [
        ("missing.py:run", ["not found", "missing.py"]),
        ("kernels.py:absent", ["kernels.py", "no function 'absent'", "ok"]),
        ("broken.py:run", ["broken.py:2", "syntax error"]),
        ("no_such_module_xyz:run", ["cannot import no_such_module_xyz", "kernels.py:run"]),
        ("kernels.py", ["module:function"]),
    ],
)
def test_reference_errors_name_the_file_and_function(
    kernels: Path, reference: str, fragments: list[str]
) -> None:
    with pytest.raises(ExecutorError) as raised:
        PythonExecutor(reference, base=kernels)
    message = str(raised.value)
    assert "\n" not in message and "Traceback" not in message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize(
    ("kind", "status", "fragment"),
    [
        ("segfault", "runtime_error", "SIGSEGV"),
        ("exit", "runtime_error", "exited with status 3"),
        ("hang", "timeout", "no progress for 1 s"),
        ("hog", "runtime_error", "memory cap of 200 MiB"),
    ],
)
def test_a_failing_row_ends_its_worker_only(
    kernels: Path, kind: str, status: str, fragment: str
) -> None:
    executor = PythonExecutor(
        "kernels.py:by_row", base=kernels, timeout_s=1.0, memory_limit_mib=200
    )
    rows = pd.DataFrame({"kind": ["fine", kind, "fine", kind, "fine"]})
    try:
        result = executor.run(rows)
    finally:
        executor.close()
    assert result["status"].tolist() == ["ok", status, "ok", status, "ok"]
    assert fragment in result["message"].iloc[1], result["message"].iloc[1]
    assert result["time"].isna().tolist() == [False, True, False, True, False]
    assert executor.worker_starts == 3  # the first, then one after each failure


def test_forked_children_are_killed_with_the_worker(kernels: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    executor = PythonExecutor("kernels.py:fork_and_hang", base=kernels, timeout_s=1.0)
    try:
        result = executor.run(pd.DataFrame({"pid_file": [str(pid_file)]}))
    finally:
        executor.close()
    assert result["status"].tolist() == ["timeout"]
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_kernel_output_does_not_disturb_the_protocol(kernels: Path) -> None:
    executor = PythonExecutor("kernels.py:noisy", base=kernels)
    try:
        result = executor.run(pd.DataFrame({"n": [1, 2, 3]}))
    finally:
        executor.close()
    assert result["status"].tolist() == ["ok"] * 3
    assert result["time"].tolist() == [2.0] * 3


def test_module_level_callable_can_be_isolated() -> None:
    executor = PythonExecutor(_square, isolate=True)
    try:
        assert executor.run(pd.DataFrame({"n": [3]}))["time"].tolist() == [9.0]
    finally:
        executor.close()
    with pytest.raises(ExecutorError, match="module-level function"):
        PythonExecutor(lambda row: 1.0, isolate=True)


def _square(row: dict[str, float]) -> float:
    return float(row["n"]) ** 2
