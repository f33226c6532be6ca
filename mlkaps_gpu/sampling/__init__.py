"""Samplers: every one is a ``Sampler`` with ``ask``/``tell``."""

from mlkaps_gpu.sampling._base import Sampler, SamplerError
from mlkaps_gpu.sampling._ga_adaptive import GAAdaptiveSampler
from mlkaps_gpu.sampling._random import LHSSampler, RandomSampler

SAMPLERS: dict[str, type[Sampler]] = {
    "random": RandomSampler,
    "lhs": LHSSampler,
    "ga_adaptive": GAAdaptiveSampler,
}

__all__ = [
    "SAMPLERS",
    "GAAdaptiveSampler",
    "LHSSampler",
    "RandomSampler",
    "Sampler",
    "SamplerError",
]
