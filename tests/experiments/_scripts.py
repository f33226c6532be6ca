"""Loading the scripts of ``experiments/`` and their package ``benchkit`` as modules, for their
tests, the way Python does when it runs a script (its folder, ``experiments/``, first on
``sys.path``), without editing ``sys.path``."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _register(name: str, path: Path, *, package: bool = False) -> ModuleType:
    locations = [str(path.parent)] if package else None
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=locations)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # first: dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def load_benchkit(submodule: str) -> ModuleType:
    """``benchkit.<submodule>`` of ``experiments/benchkit/`` (the package is registered as
    ``benchkit``, its submodules found through its ``__path__``)."""
    if "benchkit" not in sys.modules:
        _register("benchkit", EXPERIMENTS / "benchkit" / "__init__.py", package=True)
    return importlib.import_module(f"benchkit.{submodule}")


def load_script(name: str) -> ModuleType:
    """``experiments/<name>.py`` as the module ``name`` (``benchkit`` loaded first, since the
    scripts import it)."""
    load_benchkit("tools")
    return _register(name, EXPERIMENTS / f"{name}.py")
