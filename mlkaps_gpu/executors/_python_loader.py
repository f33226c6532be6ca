"""Loading a Python function from a reference: ``module:function`` or ``file.py:function``.

Used in the campaign's process (to check a configuration early) and in the measurement worker
(which loads the function again), for the Python executor's function and the cffi executor's
builder and check. Several campaigns may run in one process one after the other, each with
its own ``kernels.py``: a reference must load its own file, never one of another folder that
was loaded earlier (see :func:`load_function`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._python_function import describe, one_line
from mlkaps_gpu.executors._references import (
    is_file_reference,
    resolve_reference,
    split_reference,
)


def load_function(reference: str, base: Path | None = None) -> Callable[..., Any]:
    """The callable a reference names: ``module:function`` or ``file.py:function``.

    A file reference (relative to ``base``, without needing ``PYTHONPATH``) loads that exact
    file, under a module name made from its resolved path: never another file of the same
    name loaded earlier. It is loaded again when it changed on disk. While it runs, its folder
    comes first on ``sys.path`` (its own neighbours win over those of another folder loaded
    earlier); afterwards the folder stays on ``sys.path`` after every other entry, so that it
    may still import them but shadows no module of a later reference.

    A module reference is imported from ``sys.path`` as it is now: a module of that name
    cached from another folder (an earlier kernel's ``kernels.py``) is forgotten first.

    Raises:
        ExecutorError: naming the file or module and the function, and what went wrong.
    """
    where, name = split_reference(resolve_reference(reference, base))
    if is_file_reference(where):
        module = _load_file(Path(where))
        label = where
    else:
        label = f"module {where}"
        module = _import_module(reference, where)
    function = getattr(module, name, None)
    if function is None:
        defined = sorted(
            n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
        )
        raise ExecutorError(
            f"function {reference!r}: {label} has no function '{name}' "
            f"(it defines: {', '.join(defined[:12]) or 'no functions'})"
        )
    if not callable(function):
        raise ExecutorError(f"function {reference!r}: '{name}' in {label} is not callable")
    return function  # type: ignore[no-any-return]


def _import_module(reference: str, where: str) -> ModuleType:
    _forget_stale_neighbours_of(where.partition(".")[0])
    try:
        return importlib.import_module(where)
    except ImportError as error:
        raise ExecutorError(
            f"function {reference!r}: cannot import {where} ({one_line(error)}); give a file "
            "path such as 'kernels.py:run' (relative to the configuration file) or put the "
            "module on PYTHONPATH"
        ) from None
    except Exception as error:  # noqa: BLE001 - user code at import time
        raise ExecutorError(
            f"function {reference!r}: importing {where} raised {describe(error)}"
        ) from None


def _forget_stale_neighbours_of(name: str) -> None:
    """Before the top-level module ``name`` is imported: forget the cached modules of the
    folder ``sys.path`` finds it in (itself, its neighbours) that came from another folder."""
    importlib.invalidate_caches()
    spec = _find_spec(name)
    if spec is None or not spec.has_location or not spec.origin or _is_library(spec.origin):
        return
    origin = Path(spec.origin)
    package = spec.submodule_search_locations is not None
    _forget_stale_modules(origin.parent.parent if package else origin.parent)


def _forget_stale_modules(folder: Path) -> None:
    """Drop each cached top-level module (and its submodules) that ``folder`` provides when
    the import system would now find it in another file: its next import loads the one that
    ``sys.path`` names.

    Modules of the standard library, of installed packages and of this package are never
    dropped (a second copy of them would be two of each class); nor is a module that the
    import system no longer finds at all (a fresh process would fail on it as well).
    """
    for name in _module_names(folder):
        cached_file = getattr(sys.modules.get(name), "__file__", None)
        if not cached_file or _is_library(cached_file):
            continue
        spec = _find_spec(name)
        if spec is None or not spec.has_location or not spec.origin:
            continue
        if os.path.realpath(spec.origin) == os.path.realpath(cached_file):
            continue
        for module_name in [n for n in sys.modules if n == name or n.startswith(name + ".")]:
            del sys.modules[module_name]


def _find_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """Where an import of the top-level module ``name`` would load it from now (the import
    system's own search, without its ``sys.modules`` short cut)."""
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            spec = find_spec(name, None)
        except Exception:  # noqa: BLE001, S112 - a third-party finder's failure: not found by it
            continue
        if spec is not None:
            return spec  # type: ignore[no-any-return]
    return None


@functools.cache
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.add(str(Path(__file__).resolve().parents[1]))  # mlkaps_gpu itself
    return tuple(os.path.realpath(root) + os.sep for root in roots)


def _is_library(file: str) -> bool:
    """A file of the standard library, of an installed package or of this package."""
    path = os.path.realpath(file)
    parts = set(Path(path).parts)
    return path.startswith(_library_roots()) or bool(parts & {"site-packages", "dist-packages"})


def _load_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise ExecutorError(f"function file not found: {path}")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    module_name = f"mlkaps_kernel_{_identifier(path.stem)}_{digest}"
    stamp = _stamp(path)
    cached = sys.modules.get(module_name)
    if cached is not None and getattr(cached, "__mlkaps_stamp__", None) == stamp:
        return cached
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ExecutorError(f"{path}: not a Python file that can be loaded")
    module = importlib.util.module_from_spec(spec)
    module.__mlkaps_stamp__ = stamp  # type: ignore[attr-defined]
    sys.modules[module_name] = module
    try:
        with _folder_first(path.parent):
            spec.loader.exec_module(module)
    except SyntaxError as error:
        sys.modules.pop(module_name, None)
        raise ExecutorError(f"{path}:{error.lineno}: syntax error ({error.msg})") from None
    except Exception as error:  # noqa: BLE001 - user code at import time
        sys.modules.pop(module_name, None)
        raise ExecutorError(f"{path}: loading it raised {describe(error)}") from None
    return module


def _stamp(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_mtime_ns, status.st_size


@contextlib.contextmanager
def _folder_first(folder: Path) -> Iterator[None]:
    """``folder`` first on ``sys.path`` while a file of it runs, its neighbours cached from
    another folder forgotten; afterwards it stays on ``sys.path``, last."""
    entry = str(folder)
    sys.path.insert(0, entry)
    importlib.invalidate_caches()
    _forget_stale_modules(folder)
    try:
        yield
    finally:
        sys.path.remove(entry)
        if entry not in sys.path:
            sys.path.append(entry)


def _module_names(folder: Path) -> list[str]:
    """The top-level modules a folder provides (``name.py`` files and packages)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    names = []
    for entry in entries:
        stem, suffix = os.path.splitext(entry.name)
        if suffix == ".py" and stem.isidentifier():
            names.append(stem)
        elif entry.name.isidentifier() and os.path.isfile(os.path.join(entry.path, "__init__.py")):
            names.append(entry.name)
    return names


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)
