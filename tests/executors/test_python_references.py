"""Two folders, each with its own ``kernels.py`` defining ``value``: measured one after the other
in one process (two campaigns, or a campaign after other code), each reference measures its own
folder's kernel, in the worker and in the campaign's process. A ``file.py:function`` reference
loads that exact file; a ``module:function`` reference is not shadowed by the other folder's
module, by its folder left on ``sys.path``, or by its neighbours (``helpers.py``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from mlkaps_gpu.executors import PythonExecutor

KERNELS = "from helpers import VALUE\n\ndef value(row):\n    return VALUE\n"

ROWS = pd.DataFrame({"n": [1]})


@pytest.fixture(autouse=True)
def isolated_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The loader's changes to ``sys.path`` and ``sys.modules`` end with the test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for name in ("kernels", "helpers"):
        sys.modules.pop(name, None)


def _folder(root: Path, name: str, value: float) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "kernels.py").write_text(KERNELS)
    (folder / "helpers.py").write_text(f"VALUE = {value!r}\n")
    return folder


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    return _folder(tmp_path, "a", 1.0), _folder(tmp_path, "b", 2.0)


def _measure(reference: str, *, isolate: bool, base: Path | None = None) -> float:
    with PythonExecutor(reference, base=base, isolate=isolate) as executor:
        result = executor.run(ROWS)
    assert list(result["status"]) == ["ok"], list(result["message"])
    return float(result["time"].iloc[0])


@pytest.mark.parametrize("isolate", [True, False], ids=["worker", "in-process"])
def test_file_references_load_their_own_file_and_neighbours(
    folders: tuple[Path, Path], isolate: bool
) -> None:
    a, b = folders
    assert _measure("kernels.py:value", base=a, isolate=isolate) == 1.0
    assert _measure("kernels.py:value", base=b, isolate=isolate) == 2.0
    assert _measure(f"{a / 'kernels.py'}:value", isolate=isolate) == 1.0
    # a loaded file's folder stays on sys.path, last: it shadows no module of a later reference
    assert sys.path[-2:] == [str(a), str(b)]


@pytest.mark.parametrize("isolate", [True, False], ids=["worker", "in-process"])
def test_a_module_reference_after_another_folders_file(
    folders: tuple[Path, Path], isolate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tutorial's case: ``kernels:value`` with its folder on PYTHONPATH and as working
    folder, after a campaign of another folder's ``kernels.py``."""
    a, b = folders
    assert _measure("kernels.py:value", base=a, isolate=isolate) == 1.0
    monkeypatch.chdir(b)
    monkeypatch.syspath_prepend(str(b))
    assert _measure("kernels:value", isolate=isolate) == 2.0


def test_the_worker_searches_the_parents_path_in_its_order(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's own first entry (its working folder, here ``b``) does not push the
    parent's first entries behind the parent's later ones (``a``)."""
    a, b = folders
    monkeypatch.chdir(b)
    monkeypatch.syspath_prepend(str(a))
    monkeypatch.syspath_prepend(str(b))
    assert _measure("kernels:value", isolate=True) == 2.0


@pytest.mark.parametrize("isolate", [True, False], ids=["worker", "in-process"])
def test_a_module_reference_is_not_shadowed_by_a_cached_module(
    folders: tuple[Path, Path], isolate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = folders
    with monkeypatch.context() as inside_a:
        inside_a.syspath_prepend(str(a))
        assert _measure("kernels:value", isolate=isolate) == 1.0
    monkeypatch.syspath_prepend(str(b))
    executor = PythonExecutor("kernels:value", isolate=isolate)
    with executor:
        assert executor.function({"n": 1}) == 2.0  # what the campaign's process checked
        assert executor.run(ROWS)["time"].tolist() == [2.0]  # what was measured


def test_a_file_changed_on_disk_is_loaded_again(folders: tuple[Path, Path]) -> None:
    a, _ = folders
    assert _measure("kernels.py:value", base=a, isolate=False) == 1.0
    (a / "kernels.py").write_text("def value(row):\n    return 30.0  # changed\n")
    assert _measure("kernels.py:value", base=a, isolate=False) == 30.0


def test_a_library_module_is_never_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's file named like a module of the standard library does not replace it in the
    campaign's process (other code uses it)."""
    import json

    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "json.py").write_text("VALUE = 5.0\n")
    (folder / "kernels.py").write_text("import json\n\ndef value(row):\n    return 3.0\n")
    assert _measure("kernels.py:value", base=folder, isolate=False) == 3.0
    assert sys.modules["json"] is json
