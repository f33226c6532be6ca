"""The ``[kernel]`` section: one settings model per executor, discriminated on ``executor``.

:data:`KernelSettings` is the union the campaign's configuration declares; the registry
:data:`EXECUTOR_SETTINGS` (name -> model) is built from it and is the one list of executor names
(:data:`EXECUTOR_NAMES`): the configuration's allowed values, its error messages and the
configuration reference come from it. Before the union picks a model, :func:`_check_table`
refuses a missing or unknown ``executor`` and a key that another executor reads, naming the
key and what the chosen executor reads.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field

from mlkaps_gpu._settings import SettingError
from mlkaps_gpu.executors._c_settings import CffiKernelSettings, CupyKernelSettings
from mlkaps_gpu.executors._command_settings import CommandKernelSettings
from mlkaps_gpu.executors._python_settings import PythonKernelSettings
from mlkaps_gpu.executors._replay_settings import ReplayKernelSettings
from mlkaps_gpu.executors._settings import KernelSettingsBase


class ExternalKernelSettings(KernelSettingsBase):
    """``[kernel]`` with ``executor = "external"``: no other key."""

    executor: Literal["external"] = Field(
        description=(
            "`external`: measured by your own loop through `Campaign.ask` / `Campaign.tell`."
        )
    )


#: The model of one executor's ``[kernel]`` table, in the order the reference lists them.
AnyKernelSettings = Union[  # noqa: UP007 - the members are listed once, here
    PythonKernelSettings,
    ReplayKernelSettings,
    CffiKernelSettings,
    CupyKernelSettings,
    CommandKernelSettings,
    ExternalKernelSettings,
]


def _name(model: type[KernelSettingsBase]) -> str:
    (name,) = typing.get_args(model.model_fields["executor"].annotation)
    return str(name)


#: The registry of executors: name (``[kernel] executor``) -> its settings model.
EXECUTOR_SETTINGS: dict[str, type[KernelSettingsBase]] = {
    _name(model): model for model in typing.get_args(AnyKernelSettings)
}
#: Every executor name, in the registry's order.
EXECUTOR_NAMES: tuple[str, ...] = tuple(EXECUTOR_SETTINGS)
#: The ``[kernel]`` keys each executor reads (besides ``executor``).
KERNEL_KEYS: dict[str, tuple[str, ...]] = {
    name: tuple(key for key in model.model_fields if key != "executor")
    for name, model in EXECUTOR_SETTINGS.items()
}
#: The executors allowed, as the configuration's messages write them.
EXECUTORS_ALLOWED = "one of " + ", ".join(f'"{name}"' for name in EXECUTOR_NAMES)


def _check_table(data: Any) -> Any:
    """Refuse what the union would report badly: not a table, a missing or unknown
    ``executor``, a key another executor reads, a key the chosen executor cannot do without."""
    if not isinstance(data, dict):
        raise SettingError("", "must be a table", data)
    if "executor" not in data:
        raise SettingError("executor", f"missing, required: {EXECUTORS_ALLOWED}")
    kind = data["executor"]
    if not isinstance(kind, str) or kind not in EXECUTOR_SETTINGS:
        raise SettingError("executor", f"must be {EXECUTORS_ALLOWED}", kind)
    fields = EXECUTOR_SETTINGS[kind].model_fields
    for key, value in data.items():
        users = [name for name, keys in KERNEL_KEYS.items() if key in keys]
        if key not in fields and users:
            raise SettingError(
                str(key),
                f'not read by executor = "{kind}" (only by {", ".join(users)}); '
                f"{kind} reads: {', '.join(KERNEL_KEYS[kind])}",
                value,
            )
    for key, info in fields.items():
        if info.is_required() and key not in data:
            raise SettingError(key, f'missing: executor = "{kind}" needs it')
    return data


#: ``[kernel]``: the settings model of the table's ``executor``.
KernelSettings = Annotated[
    AnyKernelSettings, Field(discriminator="executor"), BeforeValidator(_check_table)
]


__all__ = [
    "EXECUTORS_ALLOWED",
    "EXECUTOR_NAMES",
    "EXECUTOR_SETTINGS",
    "KERNEL_KEYS",
    "AnyKernelSettings",
    "ExternalKernelSettings",
    "KernelSettings",
]
