"""The one-call entry point: ``tune(config, out=directory)``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlkaps_gpu.campaign import Campaign, CampaignConfig

#: ``progress(stage, done, total)``, called as the stages advance.
Progress = Callable[[str, int, int], None]


def tune(
    config: CampaignConfig | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    force: bool = False,
    progress: Progress | None = None,
) -> Campaign:
    """Run (or resume) a campaign end to end: sampling, surrogate, grid optimization, trees and
    the verified header.

    Args:
        config: a TOML file or a config from :func:`load_config`. It is validated completely
            before anything is written or measured (a bad one raises ``ConfigError``).
        out: the campaign directory; a half-done campaign there is resumed.
        force: resume even when the configuration differs from the one the directory was
            started with.
        progress: optional ``progress(stage, done, total)`` callback.

    Returns:
        The finished :class:`~mlkaps_gpu.campaign.Campaign` (its ``header_path`` is the header).

    Example:
        >>> import mlkaps_gpu as m
        >>> campaign = m.tune("campaign.toml", out="runs/lu")  # doctest: +SKIP
        >>> campaign.header_path.read_text()  # doctest: +SKIP
    """
    from mlkaps_gpu.campaign import Campaign, load_config

    if isinstance(config, str | os.PathLike):
        config = load_config(Path(config))
    campaign = Campaign.create_or_resume(config, Path(out), force=force)
    campaign.run(progress)
    return campaign
