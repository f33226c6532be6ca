"""Campaigns: configuration, the measurement store, the pipeline and the command line."""

from mlkaps_gpu.campaign._campaign import STAGES, Campaign, CampaignError
from mlkaps_gpu.campaign._config import CampaignConfig, ConfigError, load_config, parse_config
from mlkaps_gpu.campaign._store import SampleStore

__all__ = [
    "STAGES",
    "Campaign",
    "CampaignConfig",
    "CampaignError",
    "ConfigError",
    "SampleStore",
    "load_config",
    "parse_config",
]
