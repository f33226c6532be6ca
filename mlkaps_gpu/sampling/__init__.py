"""Samplers: every one is a ``Sampler`` with ``ask``/``tell``."""

from mlkaps_gpu.sampling._base import Sampler, SamplerError, SamplerParts
from mlkaps_gpu.sampling._bayes import BAYES_ACQUISITIONS, BayesianSampler
from mlkaps_gpu.sampling._exploit import Exploiter, ExploitSettings, finite_input_points
from mlkaps_gpu.sampling._ga_adaptive import GAAdaptiveSampler
from mlkaps_gpu.sampling._hvs import HVSrSampler, HVSSampler
from mlkaps_gpu.sampling._random import LHSSampler, RandomSampler
from mlkaps_gpu.sampling._registry import SAMPLER_NAMES, SAMPLERS, SUB_SAMPLERS
from mlkaps_gpu.sampling._settings import MAX_BATCH_SIZE, MAX_BUDGET, SamplingSettings

__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_BUDGET",
    "SamplingSettings",
    "BAYES_ACQUISITIONS",
    "SAMPLERS",
    "SAMPLER_NAMES",
    "SUB_SAMPLERS",
    "BayesianSampler",
    "ExploitSettings",
    "Exploiter",
    "GAAdaptiveSampler",
    "HVSSampler",
    "HVSrSampler",
    "LHSSampler",
    "RandomSampler",
    "Sampler",
    "SamplerError",
    "SamplerParts",
    "finite_input_points",
]
