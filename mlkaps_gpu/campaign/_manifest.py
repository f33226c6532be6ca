"""The manifest of a campaign directory, ``campaign.json``: which stages are done, their
details, the checksums of the files they wrote and the number of stored measurements.

Every change is written atomically; a stage marked done records the digests of every output of
the stages done so far, so a resume finds outputs that changed or vanished since (see
:mod:`._integrity`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mlkaps_gpu.campaign._directory import write_json
from mlkaps_gpu.campaign._integrity import changed_outputs, output_digests, read_meta
from mlkaps_gpu.campaign._readonly import META, SELECTOR_FILE

#: The stages the manifest records, in order (decisions, confirmation and header: ``trees``).
STAGES = ("sampling", "modeling", "optimization", "trees")


def stage_files(stage: str, objectives: Sequence[str], header: str) -> list[str]:
    """The files ``stage`` writes, whose checksums the manifest keeps (``header``: the
    header's file name)."""
    if stage == "modeling":
        return [f"models/{objective}.txt" for objective in objectives]
    if stage == "optimization":
        return ["optima.csv", "pareto.csv"]
    if stage == "trees":
        return [SELECTOR_FILE, header, "verification.json"]
    return []


class Manifest:
    """``campaign.json`` of one directory.

    Args:
        directory: the campaign directory.
        objectives: the campaign's objectives (they name the model files).
        header: the header's file name.
    """

    def __init__(self, directory: Path, objectives: Sequence[str], header: str) -> None:
        self.directory = Path(directory)
        self.objectives = list(objectives)
        self.header = header

    def read(self) -> dict[str, Any]:
        """The manifest, read afresh (a copy: changing it writes nothing)."""
        return read_meta(self.directory)

    def write(self, meta: dict[str, Any]) -> None:
        """Replace the manifest, all or nothing."""
        write_json(self.directory / META, meta)

    def files(self, stage: str) -> list[str]:
        """The files ``stage`` writes (:func:`stage_files`)."""
        return stage_files(stage, self.objectives, self.header)

    def mark_done(self, stage: str, samples: int, details: dict[str, Any]) -> None:
        """Record ``stage`` as done with its details, the checksums of every output of the
        stages done and the store's row count."""
        meta = self.read()
        if stage not in meta["stages"]:
            meta["stages"].append(stage)
        meta.setdefault("details", {})[stage] = details
        files = [name for done in meta["stages"] for name in self.files(done)]
        meta["files"] = output_digests(self.directory, files)
        meta["samples"] = samples
        self.write(meta)

    def clear_after(self, stage: str) -> None:
        """Forget ``stage`` and those after it (they are redone)."""
        meta = self.read()
        keep = STAGES[: STAGES.index(stage)]
        meta["stages"] = [s for s in meta["stages"] if s in keep]
        kept = {name for s in keep for name in self.files(s)}
        meta["files"] = {k: v for k, v in meta.get("files", {}).items() if k in kept}
        self.write(meta)

    def clear_changed(self) -> tuple[str, str, str] | None:
        """Forget the first stage one of whose outputs changed or vanished since it wrote
        them, and those after it; returns ``(file, problem, stage)``, or None when every
        output is as written."""
        changed = changed_outputs(self.directory, self.read())
        stages = [s for s in STAGES if any(name in changed for name in self.files(s))]
        if not stages:
            return None
        name = next(n for n in self.files(stages[0]) if n in changed)
        self.clear_after(stages[0])
        return name, changed[name], stages[0]

    def record_samples(self, samples: int) -> None:
        """Write the store's row count (a later resume finding fewer rows knows the store was
        damaged)."""
        meta = self.read()
        meta["samples"] = samples
        self.write(meta)


__all__ = ["STAGES", "Manifest", "stage_files"]
