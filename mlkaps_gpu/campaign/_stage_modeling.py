"""The modeling stage: one LightGBM surrogate per objective, saved as ``models/<objective>.txt``,
learnt from :class:`TrainingSamples` (the ``[transfer]`` sources' measurements, then the
campaign's own)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign._errors import CampaignError
from mlkaps_gpu.campaign._stage_context import StageContext
from mlkaps_gpu.campaign._store import SampleStore
from mlkaps_gpu.space import Space
from mlkaps_gpu.surrogate import LightGBMSurrogate, SurrogateSettings


class TrainingSamples:
    """What the models learn from: the successful measurements of the ``[transfer] sources``
    campaigns (other architectures, read once), then the campaign's own (read at every call).

    Args:
        store: the campaign's measurements.
        space: the campaign's space (a source's samples must lie in it).
        objectives: the campaign's objectives.
        sources: the source campaign directories.
    """

    def __init__(
        self, store: SampleStore, space: Space, objectives: Sequence[str], sources: Sequence[Path]
    ) -> None:
        self.store = store
        self.space = space
        self.objectives = list(objectives)
        self.sources = [Path(source) for source in sources]
        self._transferred: pd.DataFrame | None = None

    def transferred(self) -> pd.DataFrame:
        """The sources' successful measurements (empty without sources)."""
        if self._transferred is None:
            tables = [self._source(source) for source in self.sources]
            self._transferred = (
                pd.concat(tables, ignore_index=True) if tables else self.store.load().iloc[:0]
            )
        return self._transferred

    def _source(self, source: Path) -> pd.DataFrame:
        try:
            store = SampleStore(source / "samples.sqlite", self.space, self.objectives)
            table = store.valid_samples()
        except Exception as error:  # noqa: BLE001 - any schema mismatch is reported
            raise CampaignError(
                f"[transfer] {source}: its samples do not fit this campaign ({error})"
            ) from None
        inside = (
            self.space.is_valid(table[self.space.names]) if len(table) else np.ones(0, dtype=bool)
        )
        if not np.all(inside):
            raise CampaignError(
                f"[transfer] {source}: {int(np.sum(~inside))} samples lie outside "
                "this campaign's space"
            )
        return table

    def table(self) -> pd.DataFrame:
        """Transferred samples, then the campaign's successful measurements."""
        own = self.store.valid_samples()
        transfer = self.transferred()
        return pd.concat([transfer, own], ignore_index=True) if len(transfer) else own


class ModelingStage:
    """Fit and save one surrogate per objective.

    Each learns on a log scale where ``[surrogate] log_target`` is set and every value of its
    objective is positive.

    Args:
        context: the campaign's parts (directory, space, objectives, seed).
        settings: the ``[surrogate]`` section.
        training: what the models learn from.
    """

    def __init__(
        self, context: StageContext, settings: SurrogateSettings, training: TrainingSamples
    ) -> None:
        self.context = context
        self.settings = settings
        self.training = training

    @classmethod
    def from_settings(
        cls, settings: SurrogateSettings, context: StageContext, training: TrainingSamples
    ) -> ModelingStage:
        """The stage of ``[surrogate]``."""
        return cls(context, settings, training)

    def run(self) -> dict[str, Any]:
        """Fit and save the models; returns the stage's details: ``trained_on``,
        ``transferred`` and ``log_target`` (per objective).

        Raises:
            CampaignError: fewer than two successful measurements to learn from.
        """
        context = self.context
        valid = self.training.table()
        if len(valid) < 2:
            raise CampaignError(
                f"{context.directory}: only {len(valid)} successful measurements: nothing to learn"
            )
        features = context.space.features(valid)
        models = context.directory / "models"
        models.mkdir(exist_ok=True)
        logs = {}
        for objective in context.objectives:
            target = valid[objective].to_numpy(dtype=float)
            # [surrogate] log_target applies to positive objectives; others are learnt as they are
            logs[objective] = bool(self.settings.log_target and np.all(target > 0))
            model = LightGBMSurrogate.from_settings(
                self.settings,
                categorical_features=context.space.categorical_features,
                seed=context.seed,
                log_target=logs[objective],
            )
            model.fit(features, target).save(str(models / f"{objective}.txt"))
        return {
            "trained_on": len(valid),
            "transferred": len(self.training.transferred()),
            "log_target": logs,
        }


def load_models(
    directory: Path, objectives: Sequence[str], log_target: Mapping[str, bool], default: bool
) -> list[LightGBMSurrogate]:
    """The saved surrogates, one per objective in order, each on the scale it was trained on
    (``log_target`` per objective as the stage recorded it, else ``default``)."""
    return [
        LightGBMSurrogate.load(
            str(directory / "models" / f"{objective}.txt"),
            log_target=bool(log_target.get(objective, default)),
        )
        for objective in objectives
    ]


__all__ = ["ModelingStage", "TrainingSamples", "load_models"]
