"""Campaigns: the configuration model, the measurement store, the pipeline stages and their resume,
the capture of the machine a campaign measured on, and read-only access to finished campaigns.

Names load on first use: ``from mlkaps_gpu.campaign import ReadOnlyCampaign, CampaignError``
(what ``mlkaps-gpu select`` needs) imports neither the pipeline nor its libraries.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> (module, attribute), imported on first access
_PUBLIC = {
    "META": ("_campaign", "META"),
    "STAGES": ("_campaign", "STAGES"),
    "Campaign": ("_campaign", "Campaign"),
    "atomic_write": ("_campaign", "_atomic_write"),
    "CampaignError": ("_errors", "CampaignError"),
    "CampaignConfig": ("_config", "CampaignConfig"),
    "ConfigError": ("_config", "ConfigError"),
    "load_config": ("_config", "load_config"),
    "parse_config": ("_config", "parse_config"),
    "EnvironmentMismatchWarning": ("_environment", "EnvironmentMismatchWarning"),
    "summary_line": ("_environment", "summary_line"),
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
    "ConfigError",
    "DISTURBED_CORES",
    "EnvironmentMismatchWarning",
    "META",
    "ReadOnlyCampaign",
    "STAGES",
    "SampleStore",
    "Setup",
    "atomic_write",
    "campaign_interference",
    "load_config",
    "parse_config",
    "prepare",
    "summary_line",
]

if TYPE_CHECKING:
    from mlkaps_gpu.campaign._campaign import META, STAGES, Campaign
    from mlkaps_gpu.campaign._campaign import _atomic_write as atomic_write
    from mlkaps_gpu.campaign._config import CampaignConfig, ConfigError, load_config, parse_config
    from mlkaps_gpu.campaign._environment import EnvironmentMismatchWarning, summary_line
    from mlkaps_gpu.campaign._errors import CampaignError
    from mlkaps_gpu.campaign._load import DISTURBED_CORES, campaign_interference
    from mlkaps_gpu.campaign._readonly import ReadOnlyCampaign
    from mlkaps_gpu.campaign._setup import Setup, prepare
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
