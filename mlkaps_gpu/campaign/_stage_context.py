"""What every stage of a campaign is handed: the :class:`StageContext`.

A stage is an object built from its own settings section and this context (see
``docs/architecture.md``, "A campaign made of stages"): it writes its outputs under
``directory``, measures through ``executor`` into ``store`` and reports to ``progress``. The
:class:`~mlkaps_gpu.campaign.Campaign` builds one context per run from its directory; a test
builds one around a temporary directory and a fake executor and runs one stage alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mlkaps_gpu.campaign._load import BatchLoad, LoadProbe
from mlkaps_gpu.campaign._store import SampleStore
from mlkaps_gpu.executors import Executor
from mlkaps_gpu.space import Space

#: ``progress(stage, done, total)``: what a stage reports while it runs.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class StageContext:
    """The parts a stage works with.

    Attributes:
        directory: where the stage writes its outputs (the campaign directory).
        space: the campaign's space (the features every model learns on).
        sampling_space: the space samples and grids come from (fixed inputs, the executor's
            known configurations); ``space`` where nothing restricts it.
        objectives: the objectives, the primary first.
        directions: ``"minimize"`` or ``"maximize"``, per objective.
        seed: the campaign's seed.
        store: the measurements.
        executor: what measures a configuration.
        measure_load: record the machine's load beside each batch measured in this process
            (not for a replay, nor for measurements on Dask workers).
        progress: optional ``progress(stage, done, total)`` callback.
    """

    directory: Path
    space: Space
    sampling_space: Space
    objectives: list[str]
    directions: list[str]
    seed: int
    store: SampleStore
    executor: Executor
    measure_load: bool = False
    progress: Progress | None = None

    @property
    def maximize(self) -> bool:
        """Whether the primary objective is maximized."""
        return self.directions[0] == "maximize"

    def measure(self, rows: pd.DataFrame) -> tuple[pd.DataFrame, BatchLoad | None]:
        """Run the executor on ``rows``; with the results, the machine's load while it ran
        (None without ``measure_load`` and where ``/proc`` is absent)."""
        probe = LoadProbe().start() if self.measure_load and LoadProbe.available() else None
        results = self.executor.run(rows)
        return results, (probe.stop() if probe is not None else None)

    def report(self, stage: str, done: int, total: int) -> None:
        """Tell ``progress`` (when there is one)."""
        if self.progress is not None:
            self.progress(stage, done, total)


__all__ = ["Progress", "StageContext"]
