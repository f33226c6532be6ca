"""The campaign: its directory, manifest, lock and resume, and the order of its stages.

sampling -> modeling -> optimization -> decisions and trees (with the confirmation) -> header.
Each stage is an object of its own module (``_stage_*.py``), built from its settings section and
the parts the campaign holds (:class:`~._stages.CampaignStages`); the campaign runs the stages
not yet done and records each completion in ``campaign.json`` (:class:`~._manifest.Manifest`),
so a killed campaign resumes at the stage it was in; sampling resumes at the exact sample count
since the store appends whole batches in transactions.

Directory layout::

    config.toml          the configuration as given
    campaign.json        config hash, seed, versions, stages completed
    samples.sqlite       every measurement
    models/<obj>.txt     LightGBM boosters
    optima.csv           best predicted configuration per grid point
    selector.json        the fitted trees, as data (never a pickle)
    <prefix>.h           the header, verified against the trees
    verification.json    how the header was verified
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from mlkaps_gpu.campaign import _ask_tell
from mlkaps_gpu.campaign._config import CampaignConfig, ConfigError
from mlkaps_gpu.campaign._decisions import EvidenceScore
from mlkaps_gpu.campaign._directory import (
    check_store,
    config_folder,
    create_files,
    read_config,
    target_state,
    writer_lock,
)
from mlkaps_gpu.campaign._environment import summary_line
from mlkaps_gpu.campaign._errors import CampaignError
from mlkaps_gpu.campaign._integrity import STORE, remeasure_hint
from mlkaps_gpu.campaign._lock import CampaignLock
from mlkaps_gpu.campaign._manifest import STAGES, Manifest
from mlkaps_gpu.campaign._readonly import ReadOnlyCampaign
from mlkaps_gpu.campaign._setup import Setup, prepare
from mlkaps_gpu.campaign._stage_context import Progress
from mlkaps_gpu.campaign._stage_modeling import load_models
from mlkaps_gpu.campaign._stage_optimization import read_optima
from mlkaps_gpu.campaign._stages import CampaignStages
from mlkaps_gpu.campaign._store import SampleStore, StoreError
from mlkaps_gpu.executors import ExternalExecutor
from mlkaps_gpu.sampling import Sampler
from mlkaps_gpu.space import Space, SpaceError
from mlkaps_gpu.surrogate import LightGBMSurrogate
from mlkaps_gpu.trees import Selector

log = logging.getLogger("mlkaps_gpu")


class Campaign:
    """One tuning campaign bound to its directory.

    Use :meth:`create_or_resume` to start one; :meth:`run` runs every stage not yet done.
    """

    def __init__(self, config: CampaignConfig, setup: Setup, directory: Path) -> None:
        self.config = config
        self.setup = setup
        self.space = setup.space
        self.directory = directory
        #: the writer lock, held from create_or_resume (or open(write=True)) until close()
        self._lock: CampaignLock | None = None
        try:
            self.store = SampleStore(directory / STORE, self.space, setup.objectives)
        except StoreError as error:
            raise CampaignError(remeasure_hint(directory, str(error))) from None
        self.manifest = Manifest(directory, setup.objectives, self.header_path.name)
        #: builds each stage from its settings section and the campaign's parts
        self.stages = CampaignStages(config, setup, directory, self.store)

    @property
    def sampling_space(self) -> Space:
        """The space sampling and grids use: the full space, or one with fixed inputs, and
        where the executor knows which configurations exist (a replay's data) and they leave
        out some that the constraints allow, those only (built on first use)."""
        return self.stages.sampling_space

    # ---------------------------------------------------------------------- construction
    @classmethod
    def create_or_resume(
        cls,
        config: CampaignConfig,
        directory: str | Path,
        *,
        force: bool = False,
        remeasure: bool = False,
    ) -> Campaign:
        """Validate everything, then create the directory or resume the one found there.

        The directory stays locked for writing until :meth:`close` (or the process ends):
        another writer is refused with this process's id. Damaged or missing state is an
        error that says what to do (see :mod:`._integrity`); ``force`` also resumes with a
        changed configuration and rebuilds a damaged ``campaign.json``, ``remeasure`` sets a
        damaged or missing store aside and measures again from scratch.
        """
        directory = Path(directory)
        target_state(directory, config, force)  # read-only checks, before preparing
        setup = prepare(config)  # raises ConfigError before anything is written
        try:
            setup.space.check_grid(config.optimization.grid)
        except SpaceError as error:
            raise ConfigError(f"{config.path.name}: [optimization] grid: {error}") from None
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        lock = writer_lock(directory)
        try:
            state = target_state(directory, config, force)  # again, under the lock
            if state == "resume":
                check_store(directory, remeasure, force=force)
            else:
                create_files(directory, config, setup, rebuild=state == "rebuild")
            campaign = cls(config, setup, directory)
            campaign._lock = lock
            if state == "resume":
                campaign._resume(config)
            return campaign
        except BaseException:
            lock.release()
            if created:
                shutil.rmtree(directory, ignore_errors=True)
            raise

    def _resume(self, config: CampaignConfig) -> None:
        """Warnings and stage resets of a resumed campaign (a changed configuration under
        ``force``, outputs that changed or vanished since their stage wrote them)."""
        for difference in self.environment_warnings():
            log.warning("%s: resuming on a different machine (%s)", self.directory, difference)
        meta = self.meta
        if meta.get("config_sha256") != config.digest:
            # --force with a changed config: keep every measurement, redo every stage
            (self.directory / "config.toml").write_text(config.text, encoding="utf-8")
            meta.update(config_sha256=config.digest, config_dir=config_folder(config), stages=[])
            self.manifest.write(meta)
            log.warning("%s: configuration changed; stages will be re-run", self.directory)
        redone = self.manifest.clear_changed()
        if redone is not None:  # (file, problem, stage)
            log.warning(
                "%s: %s %s; the %s stage and those after it are redone from the measurements",
                self.directory,
                *redone,
            )

    def close(self) -> None:
        """Give the writer lock back (the campaign stays readable). Safe to call twice."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        self.setup.executor.close()

    def __enter__(self) -> Campaign:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def open(cls, directory: str | Path, *, write: bool = False) -> Campaign:
        """Open an existing campaign directory (for validate, merge, report...).

        Args:
            directory: the campaign directory.
            write: take the writer lock (commands that write into the directory), held until
                :meth:`close`; another writer is refused with its process id.
        """
        directory = Path(directory)
        config, setup = read_config(directory)
        campaign = cls(config, setup, directory)
        if write:
            campaign._lock = writer_lock(directory)
        return campaign

    # ------------------------------------------------------------------- environment, meta
    @property
    def environment(self) -> dict[str, Any]:
        """The recorded measurement environment (empty for directories that predate it)."""
        return ReadOnlyCampaign(self.directory).environment

    def environment_warnings(self) -> list[str]:
        """Differences between the recorded measurement machine and this one (none for replay
        campaigns, whose measurements were taken elsewhere by definition)."""
        return ReadOnlyCampaign(self.directory).environment_warnings()

    @property
    def meta(self) -> dict[str, Any]:
        """The manifest, ``campaign.json``, read afresh (a copy; see
        :class:`~._manifest.Manifest`): config digest, seed, version, the ``stages`` done with
        their ``details``, the checksums of their outputs and the number of measurements.

        Raises:
            CampaignError: the manifest is missing, unreadable or not a manifest (the message
                says how to rebuild it).
        """
        return self.manifest.read()

    def done(self, stage: str) -> bool:
        """Whether ``stage`` (one of :data:`STAGES`) is recorded as completed in the manifest
        (a stage whose outputs changed since is cleared when the campaign is resumed).

        Raises:
            CampaignError: the manifest cannot be read (see :attr:`meta`).
        """
        return stage in self.meta["stages"]

    def _finish(self, stage: str, details: dict[str, Any]) -> dict[str, Any]:
        """Record ``stage`` done (the stages after it are redone); returns ``details``."""
        self.manifest.clear_after(stage)
        self.manifest.mark_done(stage, len(self.store), details)
        return details

    def _record(self) -> None:
        """Write the store's row count to the manifest (after every stored batch)."""
        self.manifest.record_samples(len(self.store))

    # ---------------------------------------------------------------------------- stages
    def run(self, progress: Progress | None = None) -> dict[str, Any]:
        """Run every stage not yet completed; returns a summary (each stage's details)."""
        steps = {
            "sampling": lambda: self.sample(progress),
            "modeling": self.fit_models,
            "optimization": lambda: self.optimize(progress),
            "trees": self.build_trees,
        }
        return {stage: step() for stage, step in steps.items() if not self.done(stage)}

    def transfer_samples(self) -> pd.DataFrame:
        """Successful measurements of the ``[transfer] sources`` campaigns (other
        architectures), used as extra training data of every surrogate fit."""
        return self.stages.training.transferred()

    def training_samples(self) -> pd.DataFrame:
        """What the surrogate learns from: transferred samples, then this campaign's."""
        return self.stages.training.table()

    @property
    def confirm_share(self) -> float:
        """Share of the budget kept from sampling to confirm the header (``[sampling]
        confirm``; none with several objectives, without decisions from evidence, or when the
        campaign is measured outside, through ask / tell)."""
        if not self.decides_from_evidence or isinstance(self.setup.executor, ExternalExecutor):
            return 0.0
        return float(self.config.sampling.confirm)

    @property
    def sampling_budget(self) -> int:
        """Measurements of the sampling stage: the budget less the confirmation reserve and
        the cells the confirmation measures first (each configuration where it becomes valid,
        :meth:`Stages.edges`)."""
        budget = self.config.sampling.budget
        reserve = int(round(self.confirm_share * budget))
        edges = len(self.stages.edges(self.confirm_share)) if reserve else 0
        return max(1, budget - reserve - edges)

    def ask(self, n: int | None = None) -> pd.DataFrame:
        """Configurations to measure with your own loop (:mod:`._ask_tell`)."""
        return _ask_tell.ask(self, n)

    def tell(self, measurements: pd.DataFrame) -> int:
        """Store measurements of asked configurations (:mod:`._ask_tell`); returns the count."""
        return _ask_tell.tell(self, measurements)

    def sampling_complete(self) -> bool:
        """Whether the sampling budget is spent (nothing more to ask)."""
        return self.done("sampling") or _ask_tell.remaining(self) == 0

    def make_sampler(self) -> Sampler:
        """A new sampler of ``[sampling] method`` over the sampling space, seeded with the
        campaign's seed (:meth:`~._stages.CampaignStages.sampler`). It knows nothing of the
        store: :meth:`sample` and :meth:`ask` / :meth:`tell` restore it from the stored
        measurements before asking, so a resumed campaign draws what an uninterrupted one
        would have drawn."""
        return self.stages.sampler(self.sampling_budget)

    def sample(self, progress: Progress | None = None) -> dict[str, Any]:
        """The sampling stage: measure until the sampling budget is spent (resuming from what
        the store holds)."""
        stage = self.stages.sampling(self.sampling_budget, progress, on_stored=self._record)
        return self._finish("sampling", stage.run())

    def evidence_score(self) -> EvidenceScore:
        """Measurements and the ensemble fitted on every training sample (the transferred ones
        included), for the primary objective."""
        return self.stages.decisions().evidence_score()

    def fit_models(self) -> dict[str, Any]:
        """The modeling stage: one LightGBM surrogate per objective, saved as
        ``models/<objective>.txt``, learnt from :meth:`training_samples`; returns its details
        (``trained_on``, ``transferred``, ``log_target``). A :class:`CampaignError` where
        fewer than two measurements succeeded."""
        return self._finish("modeling", self.stages.modeling().run())

    def load_models(self) -> list[LightGBMSurrogate]:
        """The surrogates :meth:`fit_models` saved, one per objective in the configuration's
        order, each on the scale (log or not) it was trained on (once modeling is done)."""
        logs = self.meta.get("details", {}).get("modeling", {}).get("log_target", {})
        default = self.config.surrogate.log_target
        return load_models(self.directory, self.setup.objectives, logs, default)

    def grid(self) -> pd.DataFrame:
        """The input grid of ``[optimization] grid``: one row per input point, the input
        columns only (inputs fixed by ``[sampling] fixed`` held at their value), without the
        points that constraints on inputs exclude; built anew at every call. A table replay's
        grid is its recorded input points.

        Raises:
            SpaceError: the grid cannot be built (:meth:`create_or_resume` refuses it first).
        """
        return self.stages.grid()

    def optimize(self, progress: Progress | None = None) -> dict[str, Any]:
        """The optimization stage: the surrogates' best configuration at every point of
        :meth:`grid`, in ``optima.csv`` (and ``pareto.csv`` with several objectives); with
        decisions from evidence a measured configuration replaces the predicted optimum where
        the measurements say it is better (``source`` column).

        Returns:
            The stage's details: ``grid_points``, ``from_measurements``, ``method``, ``seconds``.
        """
        stage = self.stages.optimization(progress, from_evidence=self.decides_from_evidence)
        return self._finish("optimization", stage.run(self.load_models(), self.grid()))

    @property
    def decides_from_evidence(self) -> bool:
        """Whether decisions and trees use the measurements (``[optimization]
        prefer_measured``, single objective: with several the choice rule weighs them all)."""
        return bool(self.config.optimization.prefer_measured) and len(self.setup.objectives) == 1

    def load_optima(self) -> pd.DataFrame:
        """``optima.csv`` read back with the types it was written with (parameters in their
        types, the predicted, measured and header columns as floats, NaN where empty);
        ``FileNotFoundError`` before the optimization stage."""
        return read_optima(self.directory / "optima.csv", self.space)

    def samples_digest(self) -> str:
        """SHA-256 (hex) of every stored measurement, timestamps left out: the same
        measurements give the same digest. The header's provenance records it."""
        table = self.store.load().drop(columns=["timestamp"])
        return hashlib.sha256(table.to_csv(index=False).encode()).hexdigest()

    @property
    def header_path(self) -> Path:
        """Where the trees stage writes the header: ``<directory>/<[trees] prefix>.h``."""
        return self.directory / f"{self.config.trees.prefix}.h"

    def build_trees(self) -> dict[str, Any]:
        """The decisions and trees stage (mode and depth from ``[trees]``), the confirmation
        of their answers by measuring them (single objective), then the header, verified
        against the trees through cffi."""
        optima = self.load_optima()
        decisions = self.stages.decisions()
        confirmation: dict[str, Any] = {}
        if self.decides_from_evidence:
            confirm = self.stages.confirmation(decisions, self.confirm_share)
            optima, fitted, confirmation = confirm.run(optima)
        else:
            fitted = decisions.run(optima, surrogate=self.load_models()[0]).fitted
        details = self.stages.codegen().run(fitted, self._provenance(), confirmation)
        return self._finish("trees", details)

    def _provenance(self) -> dict[str, Any]:
        """What the header's comment and selector.json say the trees come from."""
        provenance: dict[str, Any] = {
            "campaign": self.config.name,
            "samples": len(self.store),
            "samples_sha256": self.samples_digest(),
            "config_sha256": self.config.digest,
        }
        if self.environment:
            replay = self.environment.get("replay")
            provenance["measured_on"] = (
                "replayed data" if replay else summary_line(self.environment)
            )
        return provenance

    def load_selector(self) -> Selector:
        """The trees :meth:`build_trees` fitted, rebuilt from ``selector.json`` (data: nothing
        is unpickled or run), checked against the manifest's checksum first; a
        :class:`CampaignError` says how to rebuild it where it is missing or changed."""
        selector: Selector = ReadOnlyCampaign(self.directory).load_selector()
        return selector


__all__ = ["Campaign", "CampaignError", "ConfigError", "STAGES"]
