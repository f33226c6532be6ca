"""The registry of samplers: the one list of ``[sampling] method`` names.

The configuration's ``method`` and ``sub_sampler`` choices and the generated reference
(``docs/config.md``) come from :data:`SAMPLERS`; adding a sampler means adding its class here.
"""

from __future__ import annotations

from mlkaps_gpu.sampling._base import Sampler
from mlkaps_gpu.sampling._bayes import BayesianSampler
from mlkaps_gpu.sampling._ga_adaptive import GAAdaptiveSampler
from mlkaps_gpu.sampling._hvs import HVSrSampler, HVSSampler
from mlkaps_gpu.sampling._random import LHSSampler, RandomSampler

#: ``[sampling] method`` name -> sampler class.
SAMPLERS: dict[str, type[Sampler]] = {
    "random": RandomSampler,
    "lhs": LHSSampler,
    "hvs": HVSSampler,
    "hvsr": HVSrSampler,
    "bayes": BayesianSampler,
    "ga_adaptive": GAAdaptiveSampler,
}
#: The names of :data:`SAMPLERS`, in order.
SAMPLER_NAMES: tuple[str, ...] = tuple(SAMPLERS)
#: The samplers GA-Adaptive can explore with (every one but itself; ``lhs`` first: its default).
SUB_SAMPLERS: tuple[str, ...] = (
    "lhs",
    *(name for name in SAMPLER_NAMES if name not in ("lhs", "ga_adaptive")),
)

__all__ = ["SAMPLERS", "SAMPLER_NAMES", "SUB_SAMPLERS"]
