"""CommandExecutor: argument substitution without a shell, parsing, failures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._command import CommandExecutor, substitute, template_fields

PY = sys.executable

# A tiny benchmark program: prints what it is told to, exits as it is told to.
PROGRAM = r"""
import json, os, signal, sys, time
mode, value = sys.argv[1], sys.argv[2]
if mode == "json":
    print("some log line")
    print(json.dumps({"time": float(value), "energy": 2 * float(value)}))
elif mode == "number":
    print(value)
elif mode == "text":
    print(f"run 1: time = 9.0 s\nrun 2: time = {value} s\ndone")
elif mode == "fail":
    sys.stderr.write("bad things happened\n")
    sys.exit(3)
elif mode == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
elif mode == "sleep":
    time.sleep(float(value))
elif mode == "garbage":
    print("no number here")
elif mode == "echo":
    print(json.dumps({"time": 1.0, "args": sys.argv[2:]}))
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bench") / "bench.py"
    path.write_text(PROGRAM)
    return path


def test_json_last_line_and_repeats(program: Path) -> None:
    executor = CommandExecutor([PY, str(program), "{mode}", "{value}"], repeats=3, warmup=1)
    result = executor.run(pd.DataFrame({"mode": ["json", "number"], "value": [0.5, 0.25]}))
    assert list(result["status"]) == ["ok", "ok"]
    assert list(result["time"]) == [0.5, 0.25]
    assert list(result["n_repeats"]) == [3, 3]
    assert json.loads(result["raw_times"][0]) == [0.5, 0.5, 0.5]


def test_several_objectives(program: Path) -> None:
    executor = CommandExecutor([PY, str(program), "json", "{value}"], objectives=("time", "energy"))
    result = executor.run(pd.DataFrame({"value": [1.5]}))
    assert result["status"][0] == "ok"
    assert result["time"][0] == 1.5 and result["energy"][0] == 3.0


def test_regex_takes_the_last_match(program: Path) -> None:
    executor = CommandExecutor(
        [PY, str(program), "text", "{value}"], pattern=r"time = ([0-9.eE+-]+) s"
    )
    assert executor.run(pd.DataFrame({"value": [0.125]}))["time"][0] == 0.125
    named = CommandExecutor(
        [PY, str(program), "text", "{value}"], pattern=r"time = (?P<time>[0-9.]+)"
    )
    assert named.run(pd.DataFrame({"value": [0.5]}))["time"][0] == 0.5
    with pytest.raises(ExecutorError):
        CommandExecutor(["x"], pattern="no group")
    with pytest.raises(ExecutorError):
        CommandExecutor(["x"], pattern="(?P<time>1)", objectives=("time", "energy"))


def test_failures_are_result_rows(program: Path) -> None:
    # generous enough for a Python start on a loaded machine
    executor = CommandExecutor([PY, str(program), "{mode}", "{value}"], timeout_s=3.0)
    frame = pd.DataFrame(
        {
            "mode": ["fail", "crash", "sleep", "garbage", "number"],
            "value": [0, 0, 30, 0, 2],
        }
    )
    result = executor.run(frame)
    assert list(result["status"]) == [
        "runtime_error",
        "runtime_error",
        "timeout",
        "runtime_error",
        "ok",
    ]
    assert "exited with status 3" in result["message"][0]
    assert "bad things happened" in result["message"][0]
    assert "SIGSEGV" in result["message"][1]
    assert "longer than 3 s" in result["message"][2]
    assert "could not read the objective" in result["message"][3]
    assert result["time"][:4].isna().all()
    invalid = CommandExecutor([PY, str(program), "fail", "0"], invalid_exit_codes=[3])
    assert invalid.run(pd.DataFrame({"x": [1]}))["status"][0] == "invalid"
    missing = CommandExecutor(["/no/such/program"])
    assert missing.run(pd.DataFrame({"x": [1]}))["status"][0] == "runtime_error"


def test_arguments_are_substituted_without_a_shell(program: Path) -> None:
    executor = CommandExecutor([PY, str(program), "echo", "{a}", "--b={b}", "{{literal}}"])
    executor_rows = pd.DataFrame({"a": ["x; rm -rf / $(whoami)"], "b": [64.0]})
    result = executor.run(executor_rows)
    assert result["status"][0] == "ok"
    assert executor.argv({"a": "x; y", "b": 64.0})[3:] == ["x; y", "--b=64", "{literal}"]
    assert template_fields("--n={n}x{m}") == ["n", "m"]
    assert substitute("{flag}", {"flag": True}) == "1"
    with pytest.raises(ExecutorError):
        template_fields("{unclosed")
    with pytest.raises(ExecutorError, match="lack"):
        executor.run(pd.DataFrame({"a": [1]}))
    with pytest.raises(ExecutorError):
        CommandExecutor("echo {x}")  # type: ignore[arg-type]
