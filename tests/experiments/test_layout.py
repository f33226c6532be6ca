"""The layout rules of ``experiments/`` (issue 41): scripts and ``benchkit`` import public names
of ``mlkaps_gpu`` only, never edit ``sys.path``, and take provenance from one helper."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.experiments._scripts import EXPERIMENTS

SOURCES = sorted([*EXPERIMENTS.glob("*.py"), *(EXPERIMENTS / "benchkit").glob("*.py")])


def _label(path: Path) -> str:
    return path.relative_to(EXPERIMENTS).as_posix()


def _imported_modules(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("path", SOURCES, ids=_label)
def test_imports_only_public_modules_of_the_package(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    private = [
        name
        for name in _imported_modules(tree)
        if name.split(".")[0] == "mlkaps_gpu"
        and any(part.startswith("_") for part in name.split(".")[1:])
    ]
    assert private == [], f"{_label(path)} imports private modules {private}"


@pytest.mark.parametrize("path", SOURCES, ids=_label)
def test_does_not_edit_sys_path(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    edits = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    ]
    assert edits == [], f"{_label(path)} touches sys.path on lines {edits}"


@pytest.mark.parametrize("path", SOURCES, ids=_label)
def test_reads_the_commit_through_benchkit_provenance(path: Path) -> None:
    if path == EXPERIMENTS / "benchkit" / "provenance.py":
        return
    text = path.read_text(encoding="utf-8")
    assert '"rev-parse"' not in text, f"{_label(path)}: use benchkit.provenance.commit()"
