"""experiments/hostile_kernels.py measures kernels of these tests: both copy one file,
tests/hostile/kernels.py, into the user's folder."""

from __future__ import annotations

import ast

from tests.experiments._scripts import load_script
from tests.hostile.user import KERNELS


def test_the_experiment_copies_the_tests_kernels() -> None:
    # loaded as Python runs the script (benchkit, which it imports, found beside it)
    module = load_script("hostile_kernels")
    assert module.KERNELS == KERNELS.resolve() and KERNELS.is_file()
    tree = ast.parse(KERNELS.read_text(encoding="utf-8"))
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert {"slow", "crash_a_third"} <= functions  # the two the experiment configures
