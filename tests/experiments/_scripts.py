"""Loading a script of ``experiments/`` as a module, for its tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def load_script(name: str) -> ModuleType:
    """``experiments/<name>.py`` as the module ``name`` (registered in ``sys.modules`` first:
    dataclasses look their module up, and sibling scripts import each other by name)."""
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
