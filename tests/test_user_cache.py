"""The per-user cache of compiled helpers: a module is loaded only after its checks pass; a
tampered, linked or group-writable one is built again, never loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlkaps_gpu import user_cache

pytestmark = pytest.mark.compiler


def _builder(name: str, calls: list[int]):
    def build(folder: Path) -> Path:
        import cffi

        calls.append(1)
        ffi = cffi.FFI()
        ffi.cdef("int answer(void);")
        ffi.set_source(name, "int answer(void) { return 42; }")
        return Path(ffi.compile(tmpdir=str(folder), verbose=False))

    return build


def _forget(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a new process: nothing loaded yet."""
    monkeypatch.setattr(user_cache, "_loaded", {})
    sys.modules.pop(name, None)


def test_a_cached_module_is_checked_and_rebuilt_when_tampered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLKAPS_GPU_CACHE", str(tmp_path / "cache"))
    name = "_mlkaps_test_" + user_cache.source_digest(str(tmp_path))[:16]
    calls: list[int] = []
    module = user_cache.load_module("test", name, _builder(name, calls))
    assert module.lib.answer() == 42 and calls == [1]
    path = Path(module.__file__)
    assert path.parent == tmp_path / "cache" / "test"
    assert user_cache.trusted(path) is None
    assert oct(path.stat().st_mode & 0o777) == "0o700"

    _forget(name, monkeypatch)  # found in the cache: nothing built
    assert user_cache.load_module("test", name, _builder(name, calls)).lib.answer() == 42
    assert calls == [1]

    # replaced by a library whose constructor writes a marker: not loaded, built again
    marker = tmp_path / "MARKER"
    source = tmp_path / "evil.c"
    source.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void m(void) "
        f'{{ fclose(fopen("{marker}", "w")); }}\n'
    )
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(path), str(source)], check=True)
    assert "digest" in (user_cache.trusted(path) or "")
    _forget(name, monkeypatch)
    assert user_cache.load_module("test", name, _builder(name, calls)).lib.answer() == 42
    assert calls == [1, 1] and not marker.exists()

    # writable by the group: not trusted either
    os.chmod(path, 0o770)
    assert user_cache.trusted(path) == "writable by other users"
    path.unlink()
    path.symlink_to(tmp_path / "evil.c")
    assert user_cache.trusted(path) == "not a regular file"


def test_the_cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLKAPS_GPU_CACHE", str(tmp_path / "mine"))
    assert user_cache.cache_root() == tmp_path / "mine"
    monkeypatch.delenv("MLKAPS_GPU_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache.cache_root() == tmp_path / "xdg" / "mlkaps_gpu"
