"""Helpers for campaign tests: a cheap Python kernel importable by configs."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

KERNEL_MODULE = '''
import math
import time

def model(row):
    """A cheap analytic 'kernel': best block grows with n; optional delay per evaluation."""
    n, block, variant = row["n"], row["block"], row["variant"]
    penalty = 0.0 if variant == "fast" else 0.3
    return math.log(block / math.sqrt(n)) ** 2 + penalty + n / 1000.0

def slow_model(row):
    time.sleep(0.02)
    return model(row)
'''

BASE_CONFIG = """\
[campaign]
name = "toy"
seed = 3

[kernel]
executor = "python"
function = "toy_kernel:{function}"

[inputs]
n = {{ type = "int", range = [16, 4096], log = true }}

[design]
block = {{ type = "int", values = [4, 8, 16, 32, 64, 128] }}
variant = {{ type = "categorical", values = ["fast", "slow"] }}
constraints = ["block <= n"]

[sampling]
method = "{method}"
budget = {budget}
batch_size = {batch}

[optimization]
grid = {{ n = 24 }}

[trees]
max_depth = 5
prefix = "toy"
verify_inputs = 2000
"""


@pytest.fixture
def kernel_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "kernel"
    folder.mkdir()
    (folder / "toy_kernel.py").write_text(textwrap.dedent(KERNEL_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder) + ":" + ":".join(sys.path))
    sys.modules.pop("toy_kernel", None)
    return folder


def write_config(
    folder: Path,
    *,
    function: str = "model",
    method: str = "lhs",
    budget: int = 120,
    batch: int = 20,
    name: str = "toy.toml",
) -> Path:
    path = folder / name
    path.write_text(
        BASE_CONFIG.format(function=function, method=method, budget=budget, batch=batch)
    )
    return path


TWO_OBJECTIVE_MODULE = '''
import math

def model(row):
    """Time falls with the block size (to sqrt(n)), energy rises with it: a real trade-off."""
    n, block = row["n"], row["block"]
    time = math.log(block / math.sqrt(n)) ** 2 + (0.0 if block * block <= n else 0.5)
    energy = block / 16.0 + (0.2 if row["variant"] == "fast" else 0.0)
    return {"time": time + 0.1, "energy": energy}
'''
