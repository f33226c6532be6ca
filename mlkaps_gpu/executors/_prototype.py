"""Checking a C kernel's entry prototype without compiling anything: cffi must parse it, so
that the configuration refuses a prototype it could not call."""

from __future__ import annotations

import re

from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._worker_api import split_prototype


def check_prototype(prototype: str) -> str:
    """The entry function's name of a C prototype that cffi can parse.

    Raises:
        ExecutorError: not a prototype, or one cffi cannot parse (an unknown type...).
    """
    import cffi

    try:
        entry, _ = split_prototype(prototype)
    except ValueError as error:
        raise ExecutorError(f"cannot parse the entry prototype: {error}") from None
    try:
        cffi.FFI().cdef(prototype.strip().rstrip(";") + ";")
    except Exception as error:  # noqa: BLE001 - cffi raises several kinds
        detail = " ".join(str(error).split())
        detail = re.sub(r'cannot parse ".*" <cdef source string>:\d+:(\d+):', r"column \1:", detail)
        raise ExecutorError(
            f"cannot parse the entry prototype {prototype!r} ({detail}); its parameters must "
            "have C's own types (int, double *, size_t, int64_t ...)"
        ) from None
    return entry


__all__ = ["check_prototype"]
