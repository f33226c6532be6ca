"""mlkaps_gpu: input-aware auto-tuning of HPC kernels, shipped as C / CUDA decision trees.

The public API (loaded on first use, so ``import mlkaps_gpu`` stays light and needs no GPU)::

    import mlkaps_gpu as m

    campaign = m.tune("campaign.toml", out="runs/lu")   # sample, model, optimize, trees, header
    config = m.load_config("campaign.toml")              # validated, typed configuration
    campaign = m.Campaign.open("runs/lu")                # an existing campaign directory
    header = m.render_header(campaign.load_selector(), "mylib")
    m.validate(campaign, reference, sizes={"n": 16})     # measured speedups over a reference
    m.merge(campaign, expert, sizes={"n": 16})           # keep tuned choices only where they win

Subpackages (``space``, ``executors``, ``sampling``, ``surrogate``, ``optimize``, ``trees``,
``codegen``, ``campaign``, ``validation``, ``analysis``, ``search``) export the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> module that defines it (imported on first access).
_PUBLIC = {
    "tune": "mlkaps_gpu._api",
    "load_config": "mlkaps_gpu.campaign",
    "parse_config": "mlkaps_gpu.campaign",
    "Campaign": "mlkaps_gpu.campaign",
    "CampaignError": "mlkaps_gpu.campaign",
    "ConfigError": "mlkaps_gpu.campaign",
    "Space": "mlkaps_gpu.space",
    "Parameter": "mlkaps_gpu.space",
    "Selector": "mlkaps_gpu.trees",
    "render_header": "mlkaps_gpu.codegen",
    "validate": "mlkaps_gpu.validation",
    "merge": "mlkaps_gpu.validation",
}

__all__ = [
    "Campaign",
    "CampaignError",
    "ConfigError",
    "Parameter",
    "Selector",
    "Space",
    "__version__",
    "load_config",
    "merge",
    "parse_config",
    "render_header",
    "tune",
    "validate",
]

if TYPE_CHECKING:
    from mlkaps_gpu._api import tune
    from mlkaps_gpu.campaign import Campaign, CampaignError, ConfigError, load_config, parse_config
    from mlkaps_gpu.codegen import render_header
    from mlkaps_gpu.space import Parameter, Space
    from mlkaps_gpu.trees import Selector
    from mlkaps_gpu.validation import merge, validate


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'mlkaps_gpu' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
