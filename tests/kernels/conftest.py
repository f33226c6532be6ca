"""Fixtures of the shipped-kernel tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compiled-module cache for the whole session (each configuration compiles once)."""
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    return tmp_path_factory.mktemp("kernel_cache")
