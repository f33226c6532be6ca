"""The helper modules of the repository's ``scripts/`` folder (the analytic cost models of the
shipped kernels, ``kernel_models.py``, and the replayed convolution, ``replay_models.py``),
loaded by path and registered under their own names, since they import each other by name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
#: ``replay_models`` imports ``kernel_models``: loaded in this order
ORDER = ("kernel_models", "replay_models")


def _load(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"no module {name} in {SCRIPTS}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # first: dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def script_module(name: str) -> ModuleType:
    """``scripts/<name>.py`` as the module ``name`` (with the modules it needs loaded first)."""
    if name not in ORDER:
        raise ValueError(f"unknown helper module {name!r} (known: {', '.join(ORDER)})")
    for needed in ORDER[: ORDER.index(name) + 1]:
        module = _load(needed)
    return module
