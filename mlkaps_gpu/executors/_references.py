"""References to a user's Python function, ``module:function`` or ``file.py:function``, as
text: split, and a file's path made absolute. Nothing here imports the function (that is
:mod:`mlkaps_gpu.executors._python_loader`), so the configuration can check references
without running user code."""

from __future__ import annotations

from pathlib import Path

from mlkaps_gpu.executors._base import ExecutorError


def split_reference(reference: str) -> tuple[str, str]:
    """``"where:function"`` -> ``(where, function)``.

    Raises:
        ExecutorError: not of that form.
    """
    where, _, name = reference.rpartition(":")
    if not where or not name.isidentifier():
        raise ExecutorError(
            f"function {reference!r}: give 'module:function' or 'file.py:function' (a path "
            "relative to the configuration file)"
        )
    return where, name


def is_file_reference(where: str) -> bool:
    """Whether the part before ``:`` names a file (``kernels.py``, ``sub/k.py``), not a module."""
    return where.endswith(".py") or "/" in where or "\\" in where


def resolve_reference(reference: str, base: Path | None) -> str:
    """The reference with a file path made absolute (relative to ``base``)."""
    where, name = split_reference(reference)
    if not is_file_reference(where):
        return reference
    path = Path(where).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return f"{path.resolve()}:{name}"


__all__ = ["is_file_reference", "resolve_reference", "split_reference"]
