"""Campaigns: the configuration model, the measurement store, the pipeline stages (each an object
built from its settings section and a :class:`StageContext`, runnable alone) and their resume,
the capture of the machine a campaign measured on, and read-only access to finished campaigns.

Names load on first use: ``from mlkaps_gpu.campaign import ReadOnlyCampaign, CampaignError``
(what ``mlkaps-gpu select`` needs) imports neither the pipeline nor its libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> (module, attribute), imported on first access
_PUBLIC = {
    "META": ("_readonly", "META"),
    "STAGES": ("_manifest", "STAGES"),
    "Campaign": ("_campaign", "Campaign"),
    "atomic_write": ("_directory", "atomic_write"),
    "CampaignStages": ("_stages", "CampaignStages"),
    "CodegenStage": ("_stage_codegen", "CodegenStage"),
    "ConfirmationStage": ("_stage_confirmation", "ConfirmationStage"),
    "Decided": ("_stage_decisions", "Decided"),
    "DecisionStage": ("_stage_decisions", "DecisionStage"),
    "ModelingStage": ("_stage_modeling", "ModelingStage"),
    "OptimizationStage": ("_stage_optimization", "OptimizationStage"),
    "SamplingStage": ("_stage_sampling", "SamplingStage"),
    "StageContext": ("_stage_context", "StageContext"),
    "TrainingSamples": ("_stage_modeling", "TrainingSamples"),
    "CampaignError": ("_errors", "CampaignError"),
    "CampaignConfig": ("_config", "CampaignConfig"),
    "ConfigError": ("_config", "ConfigError"),
    "load_config": ("_config", "load_config"),
    "parse_config": ("_config", "parse_config"),
    "EnvironmentMismatchWarning": ("_environment", "EnvironmentMismatchWarning"),
    "summary_line": ("_environment", "summary_line"),
    "cpu_id": ("_environment", "cpu_id"),
    "ReadOnlyCampaign": ("_readonly", "ReadOnlyCampaign"),
    "Setup": ("_setup", "Setup"),
    "prepare": ("_setup", "prepare"),
    "SampleStore": ("_store", "SampleStore"),
    "DISTURBED_CORES": ("_load", "DISTURBED_CORES"),
    "campaign_interference": ("_load", "campaign_interference"),
}

__all__ = [
    "Campaign",
    "CampaignConfig",
    "CampaignError",
    "CampaignStages",
    "CodegenStage",
    "ConfigError",
    "ConfirmationStage",
    "Decided",
    "DecisionStage",
    "ModelingStage",
    "OptimizationStage",
    "SamplingStage",
    "StageContext",
    "TrainingSamples",
    "DISTURBED_CORES",
    "EnvironmentMismatchWarning",
    "META",
    "ReadOnlyCampaign",
    "STAGES",
    "SampleStore",
    "Setup",
    "atomic_write",
    "campaign_interference",
    "cpu_id",
    "load_config",
    "parse_config",
    "prepare",
    "summary_line",
]

if TYPE_CHECKING:
    from mlkaps_gpu.campaign._campaign import Campaign
    from mlkaps_gpu.campaign._config import CampaignConfig, ConfigError, load_config, parse_config
    from mlkaps_gpu.campaign._directory import atomic_write
    from mlkaps_gpu.campaign._environment import (
        EnvironmentMismatchWarning,
        cpu_id,
        summary_line,
    )
    from mlkaps_gpu.campaign._errors import CampaignError
    from mlkaps_gpu.campaign._load import DISTURBED_CORES, campaign_interference
    from mlkaps_gpu.campaign._manifest import STAGES
    from mlkaps_gpu.campaign._readonly import META, ReadOnlyCampaign
    from mlkaps_gpu.campaign._setup import Setup, prepare
    from mlkaps_gpu.campaign._stage_codegen import CodegenStage
    from mlkaps_gpu.campaign._stage_confirmation import ConfirmationStage
    from mlkaps_gpu.campaign._stage_context import StageContext
    from mlkaps_gpu.campaign._stage_decisions import Decided, DecisionStage
    from mlkaps_gpu.campaign._stage_modeling import ModelingStage, TrainingSamples
    from mlkaps_gpu.campaign._stage_optimization import OptimizationStage
    from mlkaps_gpu.campaign._stage_sampling import SamplingStage
    from mlkaps_gpu.campaign._stages import CampaignStages
    from mlkaps_gpu.campaign._store import SampleStore


def __getattr__(name: str) -> Any:
    entry = _PUBLIC.get(name)
    if entry is None:
        raise AttributeError(f"module 'mlkaps_gpu.campaign' has no attribute {name!r}")
    module, attribute = entry
    value = getattr(importlib.import_module(f"mlkaps_gpu.campaign.{module}"), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
