"""The toy campaign's module and configuration, under the names the campaign tests used (the
``kernel_path`` fixture lives in tests/conftest.py)."""

from __future__ import annotations

from mlkaps_gpu.testing import TOY_CONFIG as BASE_CONFIG
from mlkaps_gpu.testing import TOY_KERNEL_MODULE as KERNEL_MODULE
from mlkaps_gpu.testing import TWO_OBJECTIVE_MODULE, write_config

__all__ = ["BASE_CONFIG", "KERNEL_MODULE", "TWO_OBJECTIVE_MODULE", "write_config"]
