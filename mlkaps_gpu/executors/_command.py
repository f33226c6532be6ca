"""External programs as kernels: run a command per configuration and read the objective(s).

``CommandExecutor(["./bench", "--n", "{n}", "--tile={tile}"])`` substitutes ``{name}`` by the
row's value of the input or design parameter ``name`` inside each argument (``{{`` and ``}}``
give literal braces; integral floats are written as integers, bools as 1/0); nothing goes
through a shell. Each row runs the command ``warmup`` times
untimed and ``repeats`` times; each objective is the median of its parsed values.

The objective is read from stdout, either

* with ``pattern``, a regular expression: one group for a single objective, or named groups
  ``(?P<time>...)`` for several; the last match in the output counts; or
* by default from the last non-empty line of stdout, parsed as JSON: a number (the single
  objective) or an object with one key per objective.

A non-zero exit gives ``runtime_error`` with the tail of stderr (a kill by a signal is named),
a run longer than ``timeout_s`` gives ``timeout`` (the process group is killed), output without
the objective gives ``runtime_error``; an exit status listed in ``invalid_exit_codes`` gives
``invalid`` (the program's own correctness check failed).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu._numbers import plain

from ._base import INVALID, OK, RUNTIME_ERROR, TIMEOUT, Executor, ExecutorError, encode_times
from ._timing import median
from ._worker_handle import describe_exit

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|[{}]")
#: Characters of stderr kept in a failure message.
STDERR_TAIL = 2000


class _RunFailedError(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def template_fields(argument: str) -> list[str]:
    """Names used as ``{name}`` in one argument; ExecutorError for a stray brace."""
    names = []
    for match in _FIELD.finditer(argument):
        text = match.group(0)
        if text in ("{", "}"):
            raise ExecutorError(f"stray brace in argument {argument!r} (write {{{{ or }}}})")
        if match.group(1):
            names.append(match.group(1))
    return names


def substitute(argument: str, values: Mapping[str, Any]) -> str:
    """Replace ``{name}`` by ``values[name]`` (``{{``/``}}`` -> literal braces)."""

    def replace(match: re.Match[str]) -> str:
        text = match.group(0)
        if text == "{{":
            return "{"
        if text == "}}":
            return "}"
        name = match.group(1)
        if name is None:
            raise ExecutorError(f"stray brace in argument {argument!r}")
        value = plain(values[name])
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            return str(int(value))  # an int column that pandas turned into floats
        return str(value)

    return _FIELD.sub(replace, argument)


class CommandExecutor(Executor):
    """Run an external program per row (see the module docstring).

    Args:
        argv_template: program and arguments, with ``{name}`` fields.
        objectives: names of the objectives read from the output.
        pattern: regular expression reading the objective(s) from stdout (default: JSON last
            line).
        repeats: measured runs per row (the objective is their median).
        warmup: runs first whose output is ignored.
        timeout_s: seconds one run may take.
        cwd: working directory of the program.
        env: environment variables added to the program's.
        invalid_exit_codes: exit statuses meaning "wrong answer" (status ``invalid``).
    """

    def __init__(
        self,
        argv_template: Sequence[str],
        *,
        objectives: Sequence[str] = ("time",),
        pattern: str | None = None,
        repeats: int = 1,
        warmup: int = 0,
        timeout_s: float = 60.0,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        invalid_exit_codes: Iterable[int] = (),
    ) -> None:
        if isinstance(argv_template, str) or not argv_template:
            raise ExecutorError("argv_template must be a non-empty list of arguments")
        self.argv_template = [str(a) for a in argv_template]
        self.fields = sorted({f for a in self.argv_template for f in template_fields(a)})
        self.objectives = tuple(objectives)
        if not self.objectives:
            raise ExecutorError("at least one objective is needed")
        self.regex = re.compile(pattern) if pattern is not None else None
        if self.regex is not None:
            named = set(self.regex.groupindex)
            if len(self.objectives) > 1 and not set(self.objectives) <= named:
                raise ExecutorError(
                    f"pattern needs a named group for each objective {list(self.objectives)}"
                )
            if len(self.objectives) == 1 and self.regex.groups < 1:
                raise ExecutorError("pattern needs a group around the objective's number")
        if repeats < 1 or warmup < 0:
            raise ExecutorError("repeats must be >= 1 and warmup >= 0")
        self.repeats = repeats
        self.warmup = warmup
        self.timeout_s = float(timeout_s)
        self.cwd = cwd
        self.env = dict(env or {})
        self.invalid_exit_codes = {int(c) for c in invalid_exit_codes}

    def argv(self, values: Mapping[str, Any]) -> list[str]:
        """The argument list for one row."""
        return [substitute(a, values) for a in self.argv_template]

    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        missing = [f for f in self.fields if f not in rows.columns]
        if missing:
            raise ExecutorError(f"rows lack the column(s) {missing} used in the command")
        out = []
        env = {**os.environ, **self.env}
        for record in rows.to_dict("records"):
            argv = self.argv(record)
            try:
                for _ in range(self.warmup):
                    self._once(argv, env)
                runs = [self._once(argv, env) for _ in range(self.repeats)]
            except _RunFailedError as failure:
                out.append(
                    {
                        **{o: np.nan for o in self.objectives},
                        "status": failure.status,
                        "n_repeats": 0,
                        "raw_times": "[]",
                        "message": failure.message,
                    }
                )
                continue
            first = [run[self.objectives[0]] for run in runs]
            row: dict[str, Any] = {o: median([run[o] for run in runs]) for o in self.objectives}
            row.update(status=OK, n_repeats=len(runs), raw_times=encode_times(first), message="")
            out.append(row)
        return pd.DataFrame(out)

    def _once(self, argv: list[str], env: dict[str, str]) -> dict[str, float]:
        try:
            proc = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as error:
            raise _RunFailedError(RUNTIME_ERROR, f"cannot start {argv[0]!r}: {error}") from None
        try:
            stdout_b, stderr_b = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise _RunFailedError(
                TIMEOUT, f"ran longer than {self.timeout_s:g} s; killed"
            ) from None
        stdout = stdout_b.decode("utf-8", "replace")
        stderr = stderr_b.decode("utf-8", "replace").strip()[-STDERR_TAIL:]
        if proc.returncode != 0:
            status = INVALID if proc.returncode in self.invalid_exit_codes else RUNTIME_ERROR
            text = f"{argv[0]} {describe_exit(proc.returncode)}"
            raise _RunFailedError(status, f"{text}; stderr: {stderr}" if stderr else text)
        try:
            return self._parse(stdout)
        except (ValueError, KeyError, TypeError) as error:
            tail = stdout.strip()[-200:]
            raise _RunFailedError(
                RUNTIME_ERROR, f"could not read the objective ({error}); stdout ends: {tail!r}"
            ) from None

    def _parse(self, stdout: str) -> dict[str, float]:
        if self.regex is not None:
            matches = list(self.regex.finditer(stdout))
            if not matches:
                raise ValueError("pattern not found")
            last = matches[-1]
            if len(self.objectives) == 1 and self.objectives[0] not in self.regex.groupindex:
                return {self.objectives[0]: _number(last.group(1))}
            return {o: _number(last.group(o)) for o in self.objectives}
        lines = [line for line in stdout.splitlines() if line.strip()]
        if not lines:
            raise ValueError("no output")
        data = json.loads(lines[-1])
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            if len(self.objectives) != 1:
                raise ValueError("a single number for several objectives")
            return {self.objectives[0]: _number(data)}
        if isinstance(data, dict):
            return {o: _number(data[o]) for o in self.objectives}
        raise ValueError("the last line is neither a number nor an object")


def _number(value: Any) -> float:
    if isinstance(value, bool) or value is None:
        raise ValueError(f"not a number: {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {value!r}")
    return number


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the program and everything it started (its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
