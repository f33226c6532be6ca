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
#: The fitted trees as data (:meth:`Selector.to_dict <mlkaps_gpu.trees.Selector.to_dict>`) and
#: the arguments the header was rendered with.
SELECTOR_FILE = "selector.json"
#: Where campaigns of mlkaps_gpu before 0.x kept the trees, as a pickle: never loaded.
LEGACY_PICKLE = "selector.pkl"
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
    def selector_path(self) -> Path:
        """Where the trees stage writes the fitted trees, as data: ``selector.json``."""
        return self.directory / SELECTOR_FILE

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

    def rebuild_hint(self) -> str:
        """How to rebuild the outputs of this campaign from its stored measurements."""
        return (
            f"run mlkaps-gpu tune CONFIG --out {self.directory} --force (CONFIG: the campaign's "
            f"configuration, a copy is {self.directory / 'config.toml'}) to rebuild it from the "
            "stored measurements"
        )

    def check_outputs(self, names: list[str] | tuple[str, ...] | None = None) -> None:
        """:class:`CampaignError` naming the first of ``names`` (paths relative to the
        directory; default: every output the manifest records) that is missing or differs from
        the checksum the manifest recorded when it was written, or that the manifest records no
        checksum of. The message says how to rebuild it from the stored measurements."""
        meta = self.meta
        recorded = meta.get("files", {})
        changed = changed_outputs(self.directory, meta)
        if names is None:
            names = sorted(recorded) if isinstance(recorded, dict) else sorted(changed)
        for name in names:
            if name in changed:
                problem = changed[name]
            elif not isinstance(recorded, dict) or name not in recorded:
                problem = f"has no checksum in {META} (not written by a finished stage)"
            else:
                continue
            raise CampaignError(f"{self.directory / name}: {problem}; {self.rebuild_hint()}")

    def selector_document(self) -> dict[str, Any]:
        """``selector.json`` read as data, after its checksum was checked; an old campaign
        whose trees are a pickle is refused (a pickle can run code: it is never loaded)."""
        path = self.directory / SELECTOR_FILE
        if not path.exists() and (self.directory / LEGACY_PICKLE).exists():
            raise CampaignError(
                f"{self.directory / LEGACY_PICKLE}: the trees of this campaign were written by "
                "an older mlkaps_gpu as a Python pickle, which is never loaded (opening it could "
                f"run any code); {self.rebuild_hint()} as {SELECTOR_FILE}"
            )
        self.check_outputs([SELECTOR_FILE])
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise CampaignError(
                f"{path}: cannot be read ({' '.join(str(error).split())}); {self.rebuild_hint()}"
            ) from None
        if not isinstance(document, dict) or not isinstance(document.get("selector"), dict):
            raise CampaignError(f"{path}: holds no 'selector' table; {self.rebuild_hint()}")
        return document

    def load_selector(self) -> Any:
        """The fitted selector, rebuilt from ``selector.json`` (data only: nothing in the
        directory is unpickled, imported or run). Damage is a :class:`CampaignError` naming
        the file, what is wrong and how to rebuild it."""
        from mlkaps_gpu.trees import Selector  # the tree libraries: only when asked for

        document = self.selector_document()
        try:
            return Selector.from_dict(document["selector"])
        except ValueError as error:
            raise CampaignError(
                f"{self.directory / SELECTOR_FILE}: not a selector ({error}); {self.rebuild_hint()}"
            ) from None

    def header_text(self) -> str:
        """The header, rendered again from ``selector.json`` and checked to be the stored
        ``<prefix>.h`` byte for byte (both checked against their checksums first): the text a
        command may compile. A header that is not the one the trees render is damage."""
        from mlkaps_gpu.codegen import render_model_header  # the tree libraries

        self.check_outputs([self.header_path.name])
        document = self.selector_document()
        selector = self.load_selector()
        arguments = document.get("header")
        path = self.header_path
        if not isinstance(arguments, dict):
            raise CampaignError(
                f"{self.directory / SELECTOR_FILE}: no 'header' table; {self.rebuild_hint()}"
            )
        versions = _pairs(arguments.get("versions"))
        provenance = _pairs(arguments.get("provenance"))
        if versions is None or provenance is None:
            raise CampaignError(
                f"{self.directory / SELECTOR_FILE}: 'header' holds no versions and provenance "
                f"lists of [key, text] pairs; {self.rebuild_hint()}"
            )
        try:
            text = render_model_header(
                selector.fitted_model(),
                prefix=self.prefix,
                versions=versions,
                provenance=provenance,
                lookup=bool(arguments.get("lookup", True)),
            )
        except ValueError as error:
            raise CampaignError(
                f"{self.directory / SELECTOR_FILE}: its trees render no header ({error}); "
                f"{self.rebuild_hint()}"
            ) from None
        try:
            stored = path.read_bytes()
        except OSError as error:
            raise CampaignError(
                f"{path}: cannot be read ({error}); {self.rebuild_hint()}"
            ) from None
        if stored != text.encode("utf-8"):
            raise CampaignError(
                f"{path}: differs from the header the trees of {SELECTOR_FILE} render; "
                f"{self.rebuild_hint()}"
            )
        return text


def _pairs(value: Any) -> dict[str, str] | None:
    """``[[key, text], ...]`` as an ordered dict (None: not such a list)."""
    if not isinstance(value, list):
        return None
    if not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(t, str) for t in p) for p in value
    ):
        return None
    return {key: text for key, text in value}


def selector_document(
    selector: Any, prefix: str, versions: dict[str, str], provenance: dict[str, Any]
) -> bytes:
    """The bytes of ``selector.json``: the selector as data and the arguments its header was
    rendered with (:meth:`ReadOnlyCampaign.header_text` renders it again from them)."""
    document = {
        "selector": selector.to_dict(),
        "header": {
            "prefix": prefix,
            # [key, value] pairs: the header lists them in this order
            "versions": [[str(k), str(v)] for k, v in versions.items()],
            "provenance": [[str(k), str(v)] for k, v in provenance.items()],
            "lookup": True,
        },
    }
    return json.dumps(document, indent=1, sort_keys=True).encode("utf-8")
