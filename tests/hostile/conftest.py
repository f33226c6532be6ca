"""The hostile tests' fixture: a user's folder with the kernels (tests/hostile/user.py holds
the helpers)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.hostile.user import KERNELS, Folder


@pytest.fixture
def folder(tmp_path: Path) -> Folder:
    path = tmp_path / "user"
    path.mkdir()
    shutil.copyfile(KERNELS, path / "kernels.py")
    return Folder(path)
