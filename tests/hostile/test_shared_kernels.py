"""experiments/hostile_kernels.py measures kernels of these tests: both copy one file,
tests/hostile/kernels.py, into the user's folder."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from tests.hostile.user import KERNELS

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "hostile_kernels.py"


def test_the_experiment_copies_the_tests_kernels() -> None:
    spec = importlib.util.spec_from_file_location("hostile_kernels_experiment", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.KERNELS == KERNELS.resolve() and KERNELS.is_file()
    tree = ast.parse(KERNELS.read_text(encoding="utf-8"))
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {"slow", "crash_a_third"} <= functions  # the two the experiment configures
