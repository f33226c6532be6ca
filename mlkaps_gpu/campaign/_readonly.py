"""A finished campaign read from its directory alone: no executor, no data files, no pipeline.

:meth:`Campaign.open <mlkaps_gpu.campaign.Campaign.open>` validates the whole configuration and
builds the executor, which re-reads every replay file (and fails where they moved). Commands that
only read results (``select``) need none of it: the stages done (``campaign.json``), the header's
prefix (``[trees] prefix`` of the saved ``config.toml``, read as plain TOML), the header, the
fitted selector and the recorded environment are all files of the directory. This module imports
the standard library only.
"""

from __future__ import annotations

import json
import pickle
import tomllib
import warnings
from pathlib import Path
from typing import Any

from mlkaps_gpu.campaign._environment import (
    EnvironmentMismatchWarning,
    capture_environment,
    environment_differences,
)
from mlkaps_gpu.campaign._errors import CampaignError
from mlkaps_gpu.campaign._integrity import changed_outputs, read_meta

META = "campaign.json"
ENVIRONMENT = "environment.json"
#: ``[trees] prefix`` when the configuration does not set it (``TreesSettings``' default).
DEFAULT_PREFIX = "mlkaps"


class ReadOnlyCampaign:
    """An existing campaign directory, for reading its results.

    Args:
        directory: the campaign directory (``tune --out``).
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    @classmethod
    def open(cls, directory: str | Path) -> ReadOnlyCampaign:
        """Open a campaign directory; :class:`CampaignError` if it is not one."""
        campaign = cls(directory)
        if not (campaign.directory / META).is_file():
            raise CampaignError(f"{directory}: not a campaign directory (no {META})")
        return campaign

    @property
    def meta(self) -> dict[str, Any]:
        """The manifest (:class:`CampaignError` saying what to do when it is damaged)."""
        return read_meta(self.directory)

    def done(self, stage: str) -> bool:
        """Whether the manifest records ``stage`` (``sampling``, ``modeling``,
        ``optimization`` or ``trees``) as completed (:class:`CampaignError` when it is
        damaged)."""
        return stage in self.meta.get("stages", [])

    @property
    def settings(self) -> dict[str, Any]:
        """The saved ``config.toml`` as plain TOML (not validated: that needs the executor)."""
        path = self.directory / "config.toml"
        try:
            return tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise CampaignError(f"{path}: unreadable ({error})") from None

    @property
    def prefix(self) -> str:
        """The header's prefix: ``[trees] prefix`` of the saved configuration, ``mlkaps``
        when it sets none (:class:`CampaignError` when it is not a string)."""
        trees = self.settings.get("trees", {})
        prefix = trees.get("prefix", DEFAULT_PREFIX) if isinstance(trees, dict) else None
        if not isinstance(prefix, str):
            raise CampaignError(f"{self.directory}/config.toml: [trees] prefix is not a string")
        return prefix

    @property
    def header_path(self) -> Path:
        """Where the trees stage writes the header: ``<directory>/<prefix>.h``."""
        return self.directory / f"{self.prefix}.h"

    @property
    def environment(self) -> dict[str, Any]:
        """The recorded measurement environment (empty for directories that predate it)."""
        path = self.directory / ENVIRONMENT
        return dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else {}

    def environment_warnings(self) -> list[str]:
        """Differences between the recorded measurement machine and this one (none for replay
        campaigns, whose measurements were taken elsewhere by definition)."""
        recorded = self.environment
        if not recorded or recorded.get("replay"):
            return []
        return environment_differences(recorded, capture_environment())

    def warn_if_elsewhere(self) -> None:
        """One :class:`EnvironmentMismatchWarning` per difference with the recorded machine."""
        for difference in self.environment_warnings():
            warnings.warn(
                f"{self.directory}: this machine differs from the one the campaign measured on "
                f"({difference}); its configurations may not suit this machine",
                EnvironmentMismatchWarning,
                stacklevel=2,
            )

    def require(self, stage: str) -> None:
        """:class:`CampaignError` unless ``stage`` is done."""
        if not self.done(stage):
            raise CampaignError(
                f"{self.directory}: the campaign has not finished its {stage} stage; run tune"
            )

    def load_selector(self) -> Any:
        """The fitted selector (unpickling it imports the tree libraries); a selector.pkl that
        changed since the trees stage wrote it is a :class:`CampaignError`."""
        rebuild = (
            f"run mlkaps-gpu tune {self.directory / 'config.toml'} --out {self.directory} to "
            "rebuild it from the measurements"
        )
        changed = changed_outputs(self.directory, self.meta).get("selector.pkl")
        if changed is not None:
            raise CampaignError(f"{self.directory}: selector.pkl {changed}; {rebuild}")
        try:
            with open(self.directory / "selector.pkl", "rb") as handle:
                return pickle.load(handle)  # noqa: S301 - our own file, written by the trees stage
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError) as error:
            raise CampaignError(
                f"{self.directory}: selector.pkl cannot be read ({error}); {rebuild}"
            ) from None
