"""The toy campaign that tests tune: a cheap analytic Python kernel (a module written to a
folder) and its configuration, with the budget, method and batch size as arguments."""

from __future__ import annotations

import textwrap
from pathlib import Path

#: Source of the module ``toy_kernel`` (see :func:`write_toy_kernel`).
TOY_KERNEL_MODULE = '''
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

#: The toy configuration; ``{function}``, ``{method}``, ``{budget}`` and ``{batch}`` are filled
#: by :func:`write_config` (the kernel is ``toy_kernel:{function}``).
TOY_CONFIG = """\
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

#: A kernel module with two objectives (``time`` and ``energy``) in a real trade-off.
TWO_OBJECTIVE_MODULE = '''
import math

def model(row):
    """Time falls with the block size (to sqrt(n)), energy rises with it: a real trade-off."""
    n, block = row["n"], row["block"]
    time = math.log(block / math.sqrt(n)) ** 2 + (0.0 if block * block <= n else 0.5)
    energy = block / 16.0 + (0.2 if row["variant"] == "fast" else 0.0)
    return {"time": time + 0.1, "energy": energy}
'''


def write_toy_kernel(folder: Path) -> Path:
    """Write ``toy_kernel.py`` into ``folder`` (which the caller puts on the path); returns it."""
    path = folder / "toy_kernel.py"
    path.write_text(textwrap.dedent(TOY_KERNEL_MODULE))
    return path


def write_config(
    folder: Path,
    *,
    function: str = "model",
    method: str = "lhs",
    budget: int = 120,
    batch: int = 20,
    name: str = "toy.toml",
) -> Path:
    """Write the toy configuration as ``folder / name``; returns its path."""
    path = folder / name
    path.write_text(TOY_CONFIG.format(function=function, method=method, budget=budget, batch=batch))
    return path
