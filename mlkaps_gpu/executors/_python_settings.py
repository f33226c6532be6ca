"""``[kernel]`` of ``executor = "python"``: a Python function, run in a worker process.

The ``function`` reference is checked for its form only; the function is imported when the
executor is built (``PythonExecutor``), never while the configuration is validated.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from mlkaps_gpu._settings import FiniteFloat, SettingError
from mlkaps_gpu.executors._settings import (
    MAX_MEMORY_LIMIT,
    KernelSettingsBase,
    Repeats,
    Timeout,
    Warmup,
)

#: ``module:function`` or ``file.py:function``.
FUNCTION_REFERENCE = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*|[^:]+\.py):[A-Za-z_][A-Za-z0-9_]*")
#: How a reference to a user's function is described in errors and the reference.
REFERENCE_ALLOWED = 'a string "module:function" or "file.py:function"'


def check_reference_form(key: str, value: str | None) -> str | None:
    """``value`` when it has the form of a function reference.

    Raises:
        SettingError: naming ``key``.
    """
    if value is not None and not FUNCTION_REFERENCE.fullmatch(value):
        raise SettingError(key, "must be 'module:function' or 'file.py:function'", value)
    return value


class PythonKernelSettings(KernelSettingsBase):
    """``[kernel]`` with ``executor = "python"``."""

    executor: Literal["python"] = Field(description="`python`: a Python function.")
    function: str = Field(
        description=(
            "python: `module:function`, or `file.py:function` (a path relative to the "
            "configuration file, loaded without PYTHONPATH), called as `function(row)` returning "
            "the objective(s), or timed as `function(**row)` with `measure = true`; it runs in "
            "a worker process (see `timeout` and `memory_limit`)."
        ),
        json_schema_extra={"allowed": REFERENCE_ALLOWED},
    )
    measure: bool = Field(
        default=False,
        description="python: time `function(**row)` instead of asking it (one objective).",
    )
    repeats: Repeats = 1
    warmup: Warmup = 0
    timeout: Timeout = 60.0
    memory_limit: FiniteFloat | None = Field(
        default=None,
        gt=0,
        le=MAX_MEMORY_LIMIT,
        description=(
            "python: MiB the kernel's worker process may allocate beyond what it holds once "
            "started; past it the call fails (status `runtime_error`) and the worker restarts. "
            "Default: no cap."
        ),
    )

    @field_validator("function")
    @classmethod
    def _module_function(cls, value: str, info: ValidationInfo) -> str | None:
        return check_reference_form(info.field_name or "function", value)

    def check_objectives(self, objectives: list[str]) -> None:
        """``measure`` times one objective."""
        if self.measure and len(objectives) != 1:
            raise SettingError(
                "measure",
                f"times one objective; the campaign has {len(objectives)}: {', '.join(objectives)}",
                True,
            )


__all__ = [
    "FUNCTION_REFERENCE",
    "REFERENCE_ALLOWED",
    "PythonKernelSettings",
    "check_reference_form",
]
