"""Importing the user code a ``[kernel]`` names, when its executor is built (never while the
configuration is validated)."""

from __future__ import annotations

from mlkaps_gpu._settings import SettingError
from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._c_settings import CffiKernelSettings
from mlkaps_gpu.executors._python_loader import load_function


def load_kernel_functions(settings: CffiKernelSettings) -> None:
    """Import a C ``source`` kernel's ``builder`` and ``check`` now, so that a missing module
    or function is named by its key before anything is compiled or run.

    Raises:
        SettingError: naming the key (``builder`` or ``check``) and what went wrong.
    """
    for key in ("builder", "check"):
        reference = getattr(settings, key)
        if reference is None:
            continue
        try:
            load_function(reference)
        except ExecutorError as error:
            raise SettingError(key, str(error), reference) from None


__all__ = ["load_kernel_functions"]
