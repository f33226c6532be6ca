"""The per-user cache of compiled helpers: the only place a compiled module is loaded from.

A campaign directory is data (see ``docs/security.md``): the helpers that make its results
callable (the header's batch function of ``select`` and header verification, the surrogate's
compiled forest engine) are built from source *this* package generated, into a folder of the
user, under a name made of the SHA-256 of that source. Next to every module lies the SHA-256 of
the built file; before a module is loaded the file must be a regular file (no link) of this
user, writable by nobody else, with that digest. A module failing a check is built again.

The folder is ``$MLKAPS_GPU_CACHE`` when set, else platformdirs' user cache folder of
``mlkaps_gpu`` (``~/.cache/mlkaps_gpu`` on Linux, ``$XDG_CACHE_HOME`` respected), else
``$XDG_CACHE_HOME/mlkaps_gpu`` or ``~/.cache/mlkaps_gpu`` when platformdirs is not installed.
This module imports the standard library only (and platformdirs when present), besides
:mod:`mlkaps_gpu._files`, which does too.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import os
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from mlkaps_gpu._files import write_atomically

_lock = threading.Lock()
_loaded: dict[str, ModuleType] = {}


def cache_root() -> Path:
    """The user's cache folder of this package (see the module docstring)."""
    root = os.environ.get("MLKAPS_GPU_CACHE")
    if root:
        return Path(root)
    try:
        import platformdirs
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "mlkaps_gpu"
    return Path(platformdirs.user_cache_dir("mlkaps_gpu", appauthor=False))


def cache_folder(kind: str) -> Path:
    """``<cache_root()>/<kind>``, created private to the user (mode 0700) when absent."""
    folder = cache_root() / kind
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def source_digest(*parts: str) -> str:
    """SHA-256 (hex) of the source texts, in order: the key a module is cached under."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _library(folder: Path, name: str) -> Path:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return folder / f"{name}{suffix}"


def trusted(path: Path) -> str | None:
    """Why ``path`` may not be loaded (None: it may): it must be a regular file, not a link,
    owned by this user, writable by nobody else, and hash to the digest recorded beside it
    (``<path>.sha256``) when it was built."""
    try:
        info = path.lstat()
    except OSError:
        return "missing"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return "owned by another user"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by other users"
    record = path.with_name(path.name + ".sha256")
    try:
        recorded = record.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return "no recorded digest"
    if _file_digest(path) != recorded:
        return "its digest differs from the one recorded when it was built"
    return None


def load_module(kind: str, name: str, build: Callable[[Path], Path]) -> ModuleType:
    """The extension module ``name`` of the cache folder ``kind``, built first when absent or
    when it fails a check of :func:`trusted`.

    Args:
        kind: the cache subfolder (``"header"``, ``"forest"``).
        name: the module's name; it must hold the digest of its source
            (:func:`source_digest`), so that another source is another module.
        build: compiles the module into the folder it is given and returns the built file
            (called in a private temporary folder inside the cache).

    Raises:
        ImportError: the module cannot be built or imported.
    """
    folder = cache_folder(kind)
    target = _library(folder, name)
    with _lock, _build_lock(folder / f"{name}.lock"):
        key = str(target)
        if key in _loaded:
            return _loaded[key]
        if trusted(target) is not None:
            work = Path(tempfile.mkdtemp(prefix=f"{name}.build.", dir=folder))
            try:
                built = Path(build(work))
                os.chmod(built, 0o700)
                digest = _file_digest(built)
                os.replace(built, target)  # a built file moved in, then its digest beside it
                write_atomically(target.with_name(target.name + ".sha256"), digest + "\n")
            finally:
                _remove_tree(work)
            problem = trusted(target)
            if problem is not None:
                raise ImportError(f"{target}: freshly built module fails its check ({problem})")
        module = _import(name, target)
        _loaded[key] = module
        return module


@contextlib.contextmanager
def _build_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (one process checks and builds a module at a time;
    nothing where ``fcntl`` is absent)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _import(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the compiled module {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _remove_tree(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


__all__ = ["cache_folder", "cache_root", "load_module", "source_digest", "trusted"]
