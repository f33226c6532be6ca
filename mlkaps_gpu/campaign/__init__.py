"""Campaigns: the configuration model, the measurement store, the pipeline stages and their resume,
and the capture of the machine a campaign measured on."""

from mlkaps_gpu.campaign._campaign import META, STAGES, Campaign, CampaignError
from mlkaps_gpu.campaign._campaign import _atomic_write as atomic_write
from mlkaps_gpu.campaign._config import CampaignConfig, ConfigError, load_config, parse_config
from mlkaps_gpu.campaign._environment import EnvironmentMismatchWarning, summary_line
from mlkaps_gpu.campaign._setup import Setup, prepare
from mlkaps_gpu.campaign._store import SampleStore

__all__ = [
    "Setup",
    "prepare",
    "META",
    "atomic_write",
    "summary_line",
    "STAGES",
    "Campaign",
    "CampaignConfig",
    "CampaignError",
    "ConfigError",
    "EnvironmentMismatchWarning",
    "SampleStore",
    "load_config",
    "parse_config",
]
