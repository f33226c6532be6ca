"""``[kernel]`` of ``executor = "command"``: an external program run per configuration."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from mlkaps_gpu._settings import SettingError
from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._command import template_fields
from mlkaps_gpu.executors._settings import (
    KernelSettingsBase,
    Repeats,
    Timeout,
    Warmup,
    base_folder,
    expand_path,
)


class CommandKernelSettings(KernelSettingsBase):
    """``[kernel]`` with ``executor = "command"``; the program is looked up (and its working
    directory resolved) when the configuration is loaded."""

    executor: Literal["command"] = Field(
        description="`command`: an external program run per configuration."
    )
    command: list[str] = Field(
        min_length=1,
        description=(
            'command: the program and its arguments, e.g. `["./bench", "--n", "{n}"]`; `{name}` '
            "is replaced by the configuration's value of parameter `name` (`{{` and `}}` give "
            "braces); no shell. A program given with a `/` is relative to `cwd`, otherwise "
            "looked up on PATH."
        ),
        json_schema_extra={"allowed": "a non-empty list of strings"},
    )
    repeats: Repeats = 1
    warmup: Warmup = 0
    timeout: Timeout = 60.0
    pattern: str | None = Field(
        default=None,
        description=(
            "command: regular expression reading the objective from stdout (one group, or one "
            "named group per objective; the last match counts). Default: the last line of "
            "stdout is JSON, a number or `{objective = value}`."
        ),
    )
    cwd: str | None = Field(
        default=None,
        description=(
            "command: working directory of the program (default: the configuration's folder)."
        ),
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="command: environment variables added for the program."
    )
    invalid_exit_codes: list[int] = Field(
        default_factory=list,
        description="command: exit statuses meaning a wrong answer (status `invalid`).",
        json_schema_extra={"allowed": "a list of integers from 1 to 255"},
    )

    @field_validator("invalid_exit_codes")
    @classmethod
    def _exit_codes(cls, value: list[int]) -> list[int]:
        for index, code in enumerate(value):
            if not 1 <= code <= 255:
                raise SettingError(
                    f"invalid_exit_codes[{index}]", "must be an exit status from 1 to 255", code
                )
        return value

    @field_validator("pattern")
    @classmethod
    def _regular_expression(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compiled = re.compile(value)
            except re.error as error:
                raise SettingError(
                    "pattern", f"not a regular expression ({error})", value
                ) from None
            if compiled.groups < 1:
                raise SettingError(
                    "pattern",
                    "needs a group around the objective's number, e.g. 'time=(\\S+)'",
                    value,
                )
        return value

    @field_validator("command")
    @classmethod
    def _command_template(cls, value: list[str]) -> list[str]:
        for index, argument in enumerate(value):
            try:
                template_fields(argument)
            except ExecutorError as error:
                raise SettingError(f"command[{index}]", str(error), argument) from None
        return value

    @model_validator(mode="after")
    def _resolve_command(self, info: ValidationInfo) -> CommandKernelSettings:
        base = base_folder(info)
        folder = expand_path(self.cwd, "cwd", base) if self.cwd is not None else base
        if not folder.is_dir():
            raise SettingError("cwd", f"not a directory: {folder}", self.cwd)
        self.cwd = str(folder)
        program = self.command[0]
        if "/" in program:
            path = Path(program) if Path(program).is_absolute() else folder / program
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise SettingError("command[0]", f"not an executable file: {path}", program)
        elif shutil.which(program) is None:
            raise SettingError("command[0]", "program not found on PATH", program)
        return self

    def command_fields(self) -> list[str]:
        """Parameter names used as ``{name}`` in ``command``."""
        return sorted({f for a in self.command for f in template_fields(a)})

    def check_objectives(self, objectives: list[str]) -> None:
        """A ``pattern`` for several objectives names one group per objective."""
        if self.pattern is not None and len(objectives) > 1:
            named = set(re.compile(self.pattern).groupindex)
            missing = [o for o in objectives if o not in named]
            if missing:
                raise SettingError(
                    "pattern",
                    f"needs a named group (?P<{missing[0]}>...) per objective",
                    self.pattern,
                )


__all__ = ["CommandKernelSettings"]
