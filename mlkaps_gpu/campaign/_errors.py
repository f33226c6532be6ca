"""The error of unusable campaign directories, in a module of its own: light commands (``select``)
raise and catch it without loading the pipeline."""


class CampaignError(RuntimeError):
    """A campaign directory cannot be used (changed config, foreign directory...)."""
