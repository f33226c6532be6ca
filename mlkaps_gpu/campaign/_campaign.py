"""The campaign pipeline: sampling -> surrogate -> grid optimization -> trees -> verified header.

Every stage reads what the previous one wrote to the campaign directory and records its
completion in ``campaign.json`` (written atomically), so a killed campaign resumes at the stage it
was in; sampling resumes at the exact sample count since the store appends whole batches in
transactions.

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
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu import __version__
from mlkaps_gpu._files import write_atomically
from mlkaps_gpu._numbers import plain
from mlkaps_gpu.campaign import _ask_tell
from mlkaps_gpu.campaign._config import CampaignConfig, ConfigError, parse_config
from mlkaps_gpu.campaign._decisions import (
    Evidence,
    EvidenceScore,
    decide,
    limit_configurations,
    out_of_bag_error,
    regret_against_best_known,
    regret_summary,
)
from mlkaps_gpu.campaign._environment import (
    capture_environment,
    summary_line,
)
from mlkaps_gpu.campaign._errors import CampaignError
from mlkaps_gpu.campaign._integrity import (
    STORE,
    changed_outputs,
    interrupted_creation,
    output_digests,
    read_meta,
    remeasure_hint,
    set_aside,
    store_problem,
)
from mlkaps_gpu.campaign._load import BatchLoad, LoadProbe
from mlkaps_gpu.campaign._lock import CampaignLock, LockHeldError
from mlkaps_gpu.campaign._readonly import (
    ENVIRONMENT,
    LEGACY_PICKLE,
    META,
    SELECTOR_FILE,
    ReadOnlyCampaign,
    selector_document,
)
from mlkaps_gpu.campaign._setup import Setup, prepare
from mlkaps_gpu.campaign._store import SampleStore, StoreError
from mlkaps_gpu.codegen import boundary_inputs, render_header, verify_header
from mlkaps_gpu.executors import ExternalExecutor
from mlkaps_gpu.optimize import GridOptimizer
from mlkaps_gpu.sampling import SAMPLERS, Exploiter, Sampler, SamplerParts
from mlkaps_gpu.space import Space, SpaceError
from mlkaps_gpu.surrogate import BootstrapEnsemble, LightGBMSurrogate
from mlkaps_gpu.trees import RegretOracle, Selector, fit_selector, tool_versions

log = logging.getLogger("mlkaps_gpu")

STAGES = ("sampling", "modeling", "optimization", "trees")
#: Most rounds of confirmation (measure the answers, re-decide, refit the trees).
_CONFIRM_ROUNDS = 8
#: Grid points up to which verification.json lists every point's measured regret.
_LISTED_POINTS = 64
#: optima.csv columns read back as numbers (empty: NaN).
_NUMERIC_PREFIXES = ("predicted_", "measured_", "best_measured_", "uncertainty", "header_")
#: Largest grid whose points GA-Adaptive exploits at (random input points beyond).
_EXPLOIT_GRID_LIMIT = 100_000
#: ``[sampling] stop_after_failures`` when a configuration does not carry it.
DEFAULT_STOP_AFTER_FAILURES = 20


Progress = Callable[[str, int, int], None]


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
        self._sampling_space: Space | None = None
        self._transfer: pd.DataFrame | None = None

    @property
    def sampling_space(self) -> Space:
        """The space sampling and grids use: the full space, or one with fixed inputs, and
        where the executor knows which configurations exist (a replay's data) and they leave
        out some that the constraints allow, those only (built on first use)."""
        if self._sampling_space is None:
            fixed = self.config.sampling.fixed
            space = self.space.with_fixed_inputs(fixed) if fixed else self.space
            known = self.setup.executor.known_designs()
            if known is not None:
                restricted = space.with_allowed_designs(*known)
                if restricted.allowed_designs_restrict():
                    space = restricted
            self._sampling_space = space
        return self._sampling_space

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
        _target_state(directory, config, force)  # read-only checks, before preparing
        setup = prepare(config)  # raises ConfigError before anything is written
        try:
            setup.space.check_grid(config.optimization.grid)
        except SpaceError as error:
            raise ConfigError(f"{config.path.name}: [optimization] grid: {error}") from None
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        lock = CampaignLock(directory)
        try:
            lock.acquire()
        except LockHeldError as error:
            raise CampaignError(str(error)) from None
        try:
            state = _target_state(directory, config, force)  # again, under the lock
            if state == "resume":
                _check_store(directory, remeasure, force=force)
            else:
                _create_files(directory, config, setup, rebuild=state == "rebuild")
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
            meta.update(config_sha256=config.digest, config_dir=_config_folder(config), stages=[])
            _write_json(self.directory / META, meta)
            log.warning("%s: configuration changed; stages will be re-run", self.directory)
        changed = changed_outputs(self.directory, self.meta)
        stages = [s for s in STAGES if any(name in changed for name in self._stage_files(s))]
        if stages:
            name = next(n for n in self._stage_files(stages[0]) if n in changed)
            log.warning(
                "%s: %s %s; the %s stage and those after it are redone from the measurements",
                self.directory,
                name,
                changed[name],
                stages[0],
            )
            self._clear_after(stages[0])

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
        meta = read_meta(directory)
        _check_store(directory, remeasure=False)  # before anything can change the file
        # relative paths of the configuration (transfer sources, data files) are resolved
        # where the configuration was, as when the campaign was created
        folder = meta.get("config_dir")
        base = Path(folder) if folder and Path(folder).is_dir() else directory
        try:
            text = (directory / "config.toml").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CampaignError(
                f"{directory}: config.toml cannot be read ({error}); restore it (a copy of the "
                "configuration the campaign was started with)"
            ) from None
        config, setup = _config_for_reading(directory, text, base)
        campaign = cls(config, setup, directory)
        if write:
            lock = CampaignLock(directory)
            try:
                lock.acquire()
            except LockHeldError as error:
                raise CampaignError(str(error)) from None
            campaign._lock = lock
        return campaign

    # ----------------------------------------------------------------------- environment
    @property
    def environment(self) -> dict[str, Any]:
        """The recorded measurement environment (empty for directories that predate it)."""
        return ReadOnlyCampaign(self.directory).environment

    def environment_warnings(self) -> list[str]:
        """Differences between the recorded measurement machine and this one (none for replay
        campaigns, whose measurements were taken elsewhere by definition)."""
        return ReadOnlyCampaign(self.directory).environment_warnings()

    # ------------------------------------------------------------------------------ meta
    @property
    def meta(self) -> dict[str, Any]:
        """The manifest, ``campaign.json``, read afresh at every access.

        It holds the configuration's digest, the seed and version the campaign was created
        with, the ``stages`` completed in order with their ``details`` (what :meth:`run`
        returns), the checksums of every output those stages wrote (``files``) and the number
        of stored measurements. The dictionary is a copy: changing it writes nothing.

        Raises:
            CampaignError: the manifest is missing, unreadable or not a manifest (the message
                says how to rebuild it).
        """
        return read_meta(self.directory)

    def _stage_files(self, stage: str) -> list[str]:
        """The files a stage writes, whose checksums the manifest keeps."""
        if stage == "modeling":
            return [f"models/{objective}.txt" for objective in self.setup.objectives]
        if stage == "optimization":
            return ["optima.csv", "pareto.csv"]
        if stage == "trees":
            return [SELECTOR_FILE, self.header_path.name, "verification.json"]
        return []

    def _mark_done(self, stage: str, **details: Any) -> None:
        meta = self.meta
        if stage not in meta["stages"]:
            meta["stages"].append(stage)
        meta.setdefault("details", {})[stage] = details
        files = [name for s in meta["stages"] for name in self._stage_files(s)]
        meta["files"] = output_digests(self.directory, files)
        meta["samples"] = len(self.store)
        _write_json(self.directory / META, meta)

    def _clear_after(self, stage: str) -> None:
        meta = self.meta
        keep = STAGES[: STAGES.index(stage)]
        meta["stages"] = [s for s in meta["stages"] if s in keep]
        kept = {name for s in keep for name in self._stage_files(s)}
        meta["files"] = {k: v for k, v in meta.get("files", {}).items() if k in kept}
        _write_json(self.directory / META, meta)

    def _record_samples(self) -> None:
        """Write the store's row count to the manifest (a later resume finding fewer rows
        knows the store was damaged)."""
        meta = self.meta
        meta["samples"] = len(self.store)
        _write_json(self.directory / META, meta)

    def done(self, stage: str) -> bool:
        """Whether ``stage`` (one of :data:`STAGES`: ``"sampling"``, ``"modeling"``,
        ``"optimization"``, ``"trees"``) is recorded as completed in the manifest.

        A stage whose outputs changed or vanished since it wrote them is no longer done once
        the campaign is resumed (:meth:`create_or_resume` clears it and the stages after it).

        Raises:
            CampaignError: the manifest cannot be read (see :attr:`meta`).
        """
        return stage in self.meta["stages"]

    # ------------------------------------------------------------------------------- run
    def run(self, progress: Progress | None = None) -> dict[str, Any]:
        """Run every stage not yet completed; returns a summary."""
        summary: dict[str, Any] = {}
        if not self.done("sampling"):
            summary["sampling"] = self.sample(progress)
        if not self.done("modeling"):
            summary["modeling"] = self.fit_models()
        if not self.done("optimization"):
            summary["optimization"] = self.optimize(progress)
        if not self.done("trees"):
            summary["trees"] = self.build_trees()
        return summary

    def transfer_samples(self) -> pd.DataFrame:
        """Successful measurements of the ``[transfer] sources`` campaigns (other
        architectures), used as extra training data of every surrogate fit."""
        if self._transfer is None:
            tables = []
            for source in self.config.transfer_sources:
                try:
                    store = SampleStore(
                        source / "samples.sqlite", self.space, self.setup.objectives
                    )
                    table = store.valid_samples()
                except Exception as error:  # noqa: BLE001 - any schema mismatch is reported
                    raise CampaignError(
                        f"[transfer] {source}: its samples do not fit this campaign ({error})"
                    ) from None
                inside = (
                    self.space.is_valid(table[self.space.names])
                    if len(table)
                    else np.ones(0, dtype=bool)
                )
                if not np.all(inside):
                    raise CampaignError(
                        f"[transfer] {source}: {int(np.sum(~inside))} samples lie outside "
                        "this campaign's space"
                    )
                tables.append(table)
            self._transfer = (
                pd.concat(tables, ignore_index=True) if tables else self.store.load().iloc[:0]
            )
        return self._transfer

    def training_samples(self) -> pd.DataFrame:
        """What the surrogate learns from: transferred samples, then this campaign's."""
        own = self.store.valid_samples()
        transfer = self.transfer_samples()
        return pd.concat([transfer, own], ignore_index=True) if len(transfer) else own

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
        """Measurements of the sampling stage: the budget less the confirmation reserve."""
        budget = self.config.sampling.budget
        return max(1, budget - int(round(self.confirm_share * budget)))

    # ------------------------------------------------------------------------ ask / tell
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
        campaign's seed.

        GA-Adaptive also gets the sampling budget, the bootstrapped ensemble as its model, the
        optimization grid as the points to exploit at (when it has at most 100,000 points) and
        the ``[transfer]`` samples as extra training data; HVS and HVSr get the primary
        objective, the Bayesian sampler the primary objective and its direction.

        The sampler knows nothing of the store: :meth:`sample` and :meth:`ask` / :meth:`tell`
        build theirs with this method and restore it from the stored measurements before
        asking, so a resumed campaign draws what an uninterrupted one would have drawn. Call it
        directly to drive a sampler of the campaign's configuration yourself.
        """
        parts = SamplerParts(
            seed=self.config.seed,
            budget=self.sampling_budget,
            objective=self.setup.objectives[0],
            maximize=self.setup.directions[0] == "maximize",
        )
        method = self.config.sampling.method
        if SAMPLERS[method].uses_campaign_data:
            transfer = self.transfer_samples()
            grid = self.grid()
            parts = replace(
                parts,
                model_factory=lambda: self._ensemble_model(),
                points=grid if 0 < len(grid) <= _EXPLOIT_GRID_LIMIT else None,
                feature_space=self.space,
                extra_training=transfer if len(transfer) else None,
                warm_start=self.config.transfer_warm_start if len(transfer) else 0.0,
            )
        return Sampler.from_settings(self.config.sampling, self.sampling_space, parts)

    def _resumed_sampler(self) -> tuple[Sampler, int]:
        """A new sampler (:meth:`make_sampler`) told every stored measurement and continuing as
        if it had asked their batches itself; and how many measurements it was told."""
        sampler = self.make_sampler()
        stored = self.store.load()
        if len(stored):
            sampler.restore(
                stored[self.space.names],
                stored.drop(columns=self.space.names),
                asks=int(stored["batch"].nunique()),
            )
        return sampler, len(stored)

    def sample(self, progress: Progress | None = None) -> dict[str, Any]:
        """Measure until the sampling budget is spent (resuming from what the store holds)."""
        budget = self.sampling_budget
        sampler, done = self._resumed_sampler()
        if done:
            log.info("resuming sampling: %d of %d measurements already stored", done, budget)
        if isinstance(self.setup.executor, ExternalExecutor) and done < budget:
            raise CampaignError(
                f"{self.directory}: {done} of {budget} measurements told; the campaign is "
                'measured outside (executor = "external"): ask and tell the rest first'
            )
        kernel_seconds = 0.0
        started = time.perf_counter()
        if self.config.execution.backend == "dask":
            # imported here: the Dask backend is optional (mlkaps_gpu[dist])
            from mlkaps_gpu.campaign._distributed import sample_distributed

            kernel_seconds = sample_distributed(
                self.config,
                sampler,
                self.store,
                objectives=self.setup.objectives,
                done=done,
                progress=progress,
                budget=budget,
            )
        else:
            kernel_seconds = self._sample_locally(sampler, done, budget, progress)
        table = self.store.load()
        status_counts = {str(k): int(v) for k, v in table["status"].value_counts().items()}
        details = {
            "samples": len(table),
            "status": status_counts,
            "executor_seconds": round(kernel_seconds, 3),
            "wall_seconds": round(time.perf_counter() - started, 3),
        }
        self._clear_after("sampling")
        self._mark_done("sampling", **details)
        return details

    def _sample_locally(
        self, sampler: Sampler, done: int, budget: int, progress: Progress | None
    ) -> float:
        """Ask, measure in this process, store and tell, batch by batch, until the budget is
        spent; stops the run when its first measurements all fail. Returns the executor's
        seconds."""
        batch_size = self.config.sampling.batch_size
        limit = getattr(self.config.sampling, "stop_after_failures", DEFAULT_STOP_AFTER_FAILURES)
        stop = _FailureWatch(self.directory, limit)
        kernel_seconds = 0.0
        while done < budget:
            rows = sampler.ask(min(batch_size, budget - done))
            if len(rows) == 0:
                log.warning("every valid configuration has been measured: stopping at %d", done)
                break
            begin = time.perf_counter()
            results, load = self._measure(rows)
            kernel_seconds += time.perf_counter() - begin
            self.store.append(rows, results, load)
            self._record_samples()
            sampler.tell(rows, results)
            done += len(rows)
            if progress:
                progress("sampling", done, budget)
            stop.check(results)
        return kernel_seconds

    def _surrogate(self, objective: str, *, log_target: bool | None = None) -> LightGBMSurrogate:
        options = self.config.surrogate
        return LightGBMSurrogate(
            categorical_features=self.space.categorical_features,
            n_estimators=options.n_estimators,
            log_target=options.log_target if log_target is None else log_target,
            seed=self.config.seed,
            params=options.params,
        )

    def _ensemble_model(self) -> BootstrapEnsemble:
        """The bootstrapped ensemble GA-Adaptive, the decisions and the trees' score use."""
        return BootstrapEnsemble(
            categorical_features=self.space.categorical_features,
            log_target=self.config.surrogate.log_target,
            seed=self.config.seed,
        )

    def evidence_score(self) -> EvidenceScore:
        """Measurements and the ensemble fitted on every training sample (the transferred ones
        included), for the primary objective."""
        objective = self.setup.objectives[0]
        maximize = self.setup.directions[0] == "maximize"
        valid = self.training_samples()
        evidence = Evidence(self.store.load(), self.space, objective, maximize=maximize)
        model = self._ensemble_model()
        target = valid[objective].to_numpy(dtype=float)
        model.log_target = evidence.log_space
        features = self.space.features(valid)
        model.fit(features, target)
        error = out_of_bag_error(model, features, target)
        return EvidenceScore(evidence, model, self.space, model_error=error)

    def fit_models(self) -> dict[str, Any]:
        """The modeling stage: one LightGBM surrogate per objective, saved as
        ``models/<objective>.txt``.

        Each learns from :meth:`training_samples` (the ``[transfer]`` samples, then this
        campaign's successful measurements), on a log scale where ``[surrogate] log_target`` is
        set and every value of its objective is positive. Marks the stage done (the later
        stages are redone); :meth:`run` calls it after sampling.

        Returns:
            The stage's details, as recorded in the manifest: ``trained_on`` (rows learnt
            from), ``transferred`` (how many of them came from other campaigns) and
            ``log_target`` (per objective, whether it was learnt on a log scale).

        Raises:
            CampaignError: fewer than two successful measurements to learn from.
        """
        valid = self.training_samples()
        if len(valid) < 2:
            raise CampaignError(
                f"{self.directory}: only {len(valid)} successful measurements: nothing to learn"
            )
        features = self.space.features(valid)
        models = self.directory / "models"
        models.mkdir(exist_ok=True)
        logs = {}
        for objective in self.setup.objectives:
            target = valid[objective].to_numpy(dtype=float)
            # [surrogate] log_target applies to positive objectives; others are learnt as they are
            logs[objective] = bool(self.config.surrogate.log_target and np.all(target > 0))
            model = self._surrogate(objective, log_target=logs[objective]).fit(features, target)
            model.save(str(models / f"{objective}.txt"))
        details = {
            "trained_on": len(valid),
            "transferred": len(self.transfer_samples()),
            "log_target": logs,
        }
        self._clear_after("modeling")
        self._mark_done("modeling", **details)
        return details

    def load_models(self) -> list[LightGBMSurrogate]:
        """The surrogates :meth:`fit_models` saved, one per objective in the configuration's
        order, each on the scale (log or not) it was trained on.

        Call it once the modeling stage is done; before that the model files are missing and
        LightGBM's loader raises.
        """
        logs = self.meta.get("details", {}).get("modeling", {}).get("log_target", {})
        return [
            LightGBMSurrogate.load(
                str(self.directory / "models" / f"{objective}.txt"),
                log_target=bool(logs.get(objective, self.config.surrogate.log_target)),
            )
            for objective in self.setup.objectives
        ]

    def grid(self) -> pd.DataFrame:
        """The input grid of ``[optimization] grid``: one row per input point, the input
        columns only (inputs fixed by ``[sampling] fixed`` held at their value), without the
        points that constraints on inputs exclude. It is built anew at every call. A table
        replay's grid is its recorded input points (those with a listed configuration).

        Raises:
            SpaceError: the grid cannot be built (see :meth:`~mlkaps_gpu.space.Space.grid`;
                :meth:`create_or_resume` refuses such a grid before anything is written).
        """
        space = self.sampling_space
        if space.listed_rows is not None:  # a table replay: its recorded input points
            return space.listed_points()
        return space.grid(self.config.optimization.grid)

    def optimize(self, progress: Progress | None = None) -> dict[str, Any]:
        """The optimization stage: the surrogates' best configuration at every point of
        :meth:`grid`, written to ``optima.csv`` (and the Pareto fronts to ``pareto.csv`` with
        several objectives).

        Runs a :class:`~mlkaps_gpu.optimize.GridOptimizer` configured by ``[optimization]``
        on :meth:`load_models` (NSGA-II grid chunks go to the Dask workers with the ``dask``
        backend). Points that admit no valid configuration are dropped; with decisions from
        evidence (:attr:`decides_from_evidence`) a measured configuration replaces the
        predicted optimum where the measurements say it is better (``source`` column:
        ``surrogate`` or ``measured``). Marks the stage done (the trees are redone); call it
        after :meth:`fit_models`.

        Args:
            progress: optional ``progress("optimization", done, total)`` callback.

        Returns:
            The stage's details, as recorded in the manifest: ``grid_points``,
            ``from_measurements`` (points whose decision is a measured configuration),
            ``method`` (the one ``auto`` chose) and ``seconds``.
        """
        optimizer = self._grid_optimizer(progress)
        started = time.perf_counter()
        optima = self._run_grid_optimizer(optimizer)
        method = optima.attrs.get("method", self.config.optimization.method)
        optima = optima[optima["n_valid"] != 0].reset_index(drop=True)
        optima["source"] = "surrogate"
        if self.decides_from_evidence:
            optima = decide(optima, self.evidence_score(), self.space, self.setup.objectives[0])
        _atomic_csv(optima, self.directory / "optima.csv")
        if len(self.setup.objectives) > 1 and len(optimizer.fronts_):
            _atomic_csv(optimizer.fronts_, self.directory / "pareto.csv")
        details = {
            "grid_points": len(optima),
            "from_measurements": int((optima["source"] == "measured").sum()),
            "method": method,
            "seconds": round(time.perf_counter() - started, 3),
        }
        self._clear_after("optimization")
        self._mark_done("optimization", **details)
        return details

    def _grid_optimizer(self, progress: Progress | None) -> GridOptimizer:
        """The :class:`~mlkaps_gpu.optimize.GridOptimizer` of ``[optimization]``, telling
        ``progress("optimization", done, total)``."""
        options = self.config.optimization

        def report(done: int, total: int) -> None:
            if progress:
                progress("optimization", done, total)

        return GridOptimizer(
            self.space,
            objectives=self.setup.objectives,
            directions=self.setup.directions,
            method=options.method,  # type: ignore[arg-type]
            population=options.population,
            generations=options.generations,
            weights=options.weights,
            bounds=options.bounds,
            window=options.window,
            seed=self.config.seed,
            progress=report,
        )

    def _run_grid_optimizer(self, optimizer: GridOptimizer) -> pd.DataFrame:
        """The optimizer's optima on :meth:`grid` with :meth:`load_models`; NSGA-II grid
        chunks go to the Dask workers with the ``dask`` backend."""
        if (
            self.config.execution.backend == "dask"
            and optimizer.chosen_method(self.grid()) == "nsga2"
        ):
            # grid chunks on the Dask workers: each chunk carries its own seed, so the result
            # is the single-process one whatever the number of workers
            from mlkaps_gpu.campaign._distributed import connect

            with connect(self.config.execution, label=self.config.path.name) as (client, _):
                optimizer.map_chunks = lambda function, items: client.gather(
                    client.map(function, items, pure=False)
                )
                return optimizer.run(self.load_models(), self.grid())
        return optimizer.run(self.load_models(), self.grid())

    @property
    def decides_from_evidence(self) -> bool:
        """Whether decisions and trees use the measurements (``[optimization]
        prefer_measured``, single objective: with several the choice rule weighs them all)."""
        return bool(self.config.optimization.prefer_measured) and len(self.setup.objectives) == 1

    def load_optima(self) -> pd.DataFrame:
        """``optima.csv`` read back with the types it was written with: every parameter
        column in its parameter's type (categoricals as strings, booleans as ``bool``), the
        predicted, measured and header columns as floats (NaN where empty).

        Call it once the optimization stage is done; ``optima.csv`` missing raises
        ``FileNotFoundError``.
        """
        optima = pd.read_csv(self.directory / "optima.csv", keep_default_na=False)
        for name in self.space.names:
            parameter = self.space.parameters[name]
            kind = parameter.kind
            if kind == "categorical":
                optima[name] = optima[name].astype(str).astype(object)
            elif kind == "bool":
                optima[name] = optima[name].map(
                    lambda v: v if isinstance(v, bool) else str(v) == "True"
                )
            else:
                optima[name] = optima[name].astype(parameter.dtype)
        for column in optima.columns:
            if column.startswith(_NUMERIC_PREFIXES):
                optima[column] = pd.to_numeric(optima[column], errors="coerce")
        return optima

    def samples_digest(self) -> str:
        """SHA-256 (hex) of every stored measurement, timestamps left out: the same
        measurements give the same digest. The header's provenance records it."""
        table = self.store.load().drop(columns=["timestamp"])
        return hashlib.sha256(table.to_csv(index=False).encode()).hexdigest()

    @property
    def header_path(self) -> Path:
        """Where the trees stage writes the header: ``<directory>/<[trees] prefix>.h``
        (the file exists once :meth:`build_trees` has run)."""
        return self.directory / f"{self.config.trees.prefix}.h"

    def build_trees(self) -> dict[str, Any]:
        """Fit the trees (mode and depth from ``[trees]``), confirm their answers by measuring
        them (single objective), write the header and verify it against the trees through
        cffi."""
        options = self.config.trees
        optima = self.load_optima()
        confirmation: dict[str, Any] = {}
        if self.decides_from_evidence:
            optima, fitted, confirmation = self._confirmed_selector(optima)
        else:
            fitted = self._fit_on_predictions(optima)
        selector = fitted.selector
        provenance = {
            "campaign": self.config.name,
            "samples": len(self.store),
            "samples_sha256": self.samples_digest(),
            "config_sha256": self.config.digest,
        }
        if self.environment:
            provenance["measured_on"] = (
                "replayed data"
                if self.environment.get("replay")
                else summary_line(self.environment)
            )
        versions = tool_versions()
        header = render_header(selector, options.prefix, provenance=provenance)
        rng = np.random.default_rng(self.config.seed)
        checks = boundary_inputs(selector, options.verify_inputs, rng)
        # compiled into the user's cache, never into the campaign directory
        report = verify_header(selector, header, checks, prefix=options.prefix)
        if not report.ok:
            raise CampaignError(f"generated header failed verification: {report}")
        document = selector_document(selector, options.prefix, versions, provenance)
        _atomic_write(self.directory / SELECTOR_FILE, document)
        (self.directory / LEGACY_PICKLE).unlink(missing_ok=True)
        _atomic_write(self.header_path, header.encode())
        details = {
            "header": self.header_path.name,
            "verified_inputs": report.n_rows,
            "mismatches": report.n_mismatches,
            "leaves": {name: int(tree.n_leaves) for name, tree in _tree_sizes(selector).items()},
            "mode": options.mode,
            "depth": fitted.sweep.chosen,
            "depth_sweep": fitted.sweep.records(),
            **confirmation,
        }
        _write_json(self.directory / "verification.json", details)
        self._mark_done("trees", **details)
        return details

    def _fit_on_predictions(self, optima: pd.DataFrame) -> Any:
        """The trees fitted on the optima, judged by the saved surrogate's predictions (several
        objectives, or ``prefer_measured = false``)."""
        options = self.config.trees
        surrogate = self.load_models()[0]
        sign = -1.0 if self.setup.directions[0] == "maximize" else 1.0
        space = self.space

        def score(table: pd.DataFrame) -> np.ndarray:
            return sign * surrogate.predict(space.features(table))

        return fit_selector(
            optima,
            space,
            score,
            mode=options.mode,
            max_depth=options.max_depth,
            depth_tolerance=options.depth_tolerance,
            random_state=self.config.seed,
        )

    # ---------------------------------------------------------------------- confirmation
    def _fit_on_evidence(self, optima: pd.DataFrame, score: EvidenceScore) -> Any:
        """The trees fitted on the decisions, judged by the evidence: regret from the
        pessimistic estimates (clipped at zero), and never a merge that measurements refute."""
        options = self.config.trees
        space = self.space
        oracle = RegretOracle(optima, space, score.score, clip=True)
        decisions = optima[space.names].reset_index(drop=True)

        def measured_regret(table: pd.DataFrame) -> np.ndarray:
            return score.measured_regret(table, decisions)

        return fit_selector(
            optima,
            space,
            score.score,
            mode=options.mode,
            max_depth=options.max_depth,
            depth_tolerance=options.depth_tolerance,
            random_state=self.config.seed,
            oracle=oracle,
            measured_regret=measured_regret,
        )

    def _confirmed_selector(self, optima: pd.DataFrame) -> tuple[pd.DataFrame, Any, dict]:
        """Fit the trees, measure their answers at the grid points where they were never
        measured (within the budget the sampling stage left), re-decide and refit; when every
        answer is measured, spend what is left on the answers' most promising unmeasured
        neighbours. Where the budget (or the rounds) ends before an answer was measured and
        its point has measurements, a configuration measured there ships instead
        (:meth:`EvidenceScore.only_measured_at`). Rewrites optima.csv with measured beside
        predicted values."""
        budget = self.config.sampling.budget
        score = self.evidence_score()
        optima = self._decide(optima, score)
        fitted = self._fit_on_evidence(optima, score)
        spent = {"answers": 0, "neighbours": 0, "unconfirmed": 0, "measured_instead": 0}
        rounds = 0
        while rounds < _CONFIRM_ROUNDS and len(self.store) < budget:
            left = budget - len(self.store)
            answers = self._answers(fitted.selector, optima)
            tried = score.evidence.tried(answers)  # a failed answer is not run again
            # an answer unlisted (invalid) at its point is not measured: it can only fail
            unmeasured = answers[~tried & self.space.is_valid(answers)]
            unmeasured = unmeasured.drop_duplicates(self.space.names)
            kind = "answers" if len(unmeasured) else "neighbours"
            if len(unmeasured) > left:
                unmeasured = self._least_certain(unmeasured, score, left, rounds)
            rows = unmeasured if len(unmeasured) else self._polish_rows(optima, score, left)
            if len(rows) == 0:
                break
            rows = rows[self.space.names].reset_index(drop=True)
            self.store.append(rows, *self._measure(rows))
            spent[kind] += len(rows)
            rounds += 1
            score = self.evidence_score()
            optima = self._decide(optima, score)
            fitted = self._fit_on_evidence(optima, score)
        # The budget (or the rounds) ended before some answers were measured: where the point
        # has measurements, ship a configuration measured there rather than an unconfirmed guess.
        unconfirmed = ~score.evidence.tried(self._answers(fitted.selector, optima))
        spent["unconfirmed"] = int(np.count_nonzero(unconfirmed))
        if self.confirm_share > 0 and unconfirmed.any():
            strict = score.only_measured_at(optima.loc[unconfirmed, self.space.input_names])
            spent["measured_instead"] = 0 if strict.strict is None else len(strict.strict)
            if spent["measured_instead"]:
                score = strict
                optima = self._decide(optima, score)
                fitted = self._fit_on_evidence(optima, score)
        optima = self._with_header_columns(optima, fitted.selector, score)
        _atomic_csv(optima, self.directory / "optima.csv")
        return optima, fitted, self._confirmation_details(optima, spent, rounds)

    def _decide(self, optima: pd.DataFrame, score: EvidenceScore) -> pd.DataFrame:
        """Every grid point's decision (:func:`decide`), within ``[trees] max_configs``
        distinct configurations where it is set (:func:`limit_configurations`)."""
        decided = decide(optima, score, self.space, self.setup.objectives[0])
        limit = self.config.trees.max_configs
        return decided if limit is None else limit_configurations(decided, score, self.space, limit)

    def _least_certain(
        self, answers: pd.DataFrame, score: EvidenceScore, n: int, rounds: int
    ) -> pd.DataFrame:
        """The ``n`` unmeasured answers whose estimate is least certain (the ensemble's
        spread, largest first; ties in a seeded random order): the confirmation measures where
        the shipped answer could be most wrong."""
        _, uncertainty, _, _ = score.estimate(answers[self.space.names])
        rng = np.random.default_rng([self.config.seed, rounds, 17])
        tie_break = rng.permutation(len(answers))
        order = np.lexsort((tie_break, -np.round(uncertainty, 6)))
        return answers.iloc[np.sort(order[:n])]

    def _answers(self, selector: Selector, optima: pd.DataFrame) -> pd.DataFrame:
        """The selector's configuration at every grid point (inputs and design columns)."""
        inputs = optima[self.space.input_names].reset_index(drop=True)
        chosen = selector.select(inputs).reset_index(drop=True)
        return pd.concat([inputs, chosen], axis=1)[self.space.names]

    def _polish_rows(self, optima: pd.DataFrame, score: EvidenceScore, n: int) -> pd.DataFrame:
        """Up to one batch (and ``n``) of unmeasured neighbours of the decisions, ranked by
        the ensemble's acquisition (see :class:`~mlkaps_gpu.sampling.Exploiter`)."""
        batch = min(n, int(self.config.sampling.batch_size))
        points = optima[self.space.input_names].drop_duplicates().reset_index(drop=True)
        rng = np.random.default_rng([self.config.seed, len(self.store), 23])
        counts = np.zeros(len(points), dtype=np.int64)
        np.add.at(counts, rng.choice(len(points), batch, replace=batch > len(points)), 1)
        objective = self.setup.objectives[0]
        exploiter = Exploiter(
            self.sampling_space,
            feature_space=self.space,
            objective=objective,
            maximize=self.setup.directions[0] == "maximize",
        )
        measured = self.store.valid_samples()
        seen = self.sampling_space.key(self.store.load())
        return exploiter.propose(score.model, measured, points, counts, seen, rng)

    def _with_header_columns(
        self, optima: pd.DataFrame, selector: Selector, score: EvidenceScore
    ) -> pd.DataFrame:
        """optima with, per grid point, the best measured value there, the header's measured
        regret against it (NaN where either is unknown) and whether the header's answer
        failed there (``header_failed``: every run of it at those inputs failed)."""
        objective = self.setup.objectives[0]
        evidence = score.evidence
        inputs = self.space.input_names
        best = evidence.table.sort_values("_f", kind="stable").drop_duplicates(inputs)
        best = best[[*inputs, "_f"]].rename(columns={"_f": "_best"})
        merged = optima[inputs].merge(best, on=inputs, how="left")
        best_signed = merged["_best"].to_numpy(dtype=np.float64)
        answers = self._answers(selector, optima)
        found = evidence.match(answers)
        count = found["_n"].to_numpy()
        header = evidence.to_objective(found["_f"].to_numpy())
        reference = evidence.to_objective(best_signed)
        regret = evidence.sign * (header - reference) / np.abs(reference)
        out = optima.copy()
        out[f"best_measured_{objective}"] = reference
        out[f"header_measured_{objective}"] = np.where(count > 0, header, np.nan)
        out["header_measured_regret"] = np.where(count > 0, np.maximum(regret, 0.0), np.nan)
        out["header_failed"] = found["_failed"].to_numpy()
        out["header_regret"] = regret_against_best_known(
            score, answers, optima, best_signed, objective
        )
        return out

    def _confirmation_details(
        self, optima: pd.DataFrame, spent: dict[str, int], rounds: int
    ) -> dict[str, Any]:
        """What verification.json says about the confirmation and the measured regret."""
        objective = self.setup.objectives[0]
        regret = optima["header_measured_regret"].to_numpy(dtype=np.float64)
        known = regret[np.isfinite(regret)]
        details: dict[str, Any] = {
            "confirmation": {
                "rounds": rounds,
                "measured_answers": spent["answers"],
                "measured_neighbours": spent["neighbours"],
                "unconfirmed_answers": spent["unconfirmed"],
                "measured_instead": spent["measured_instead"],
            },
            "measured_regret": {
                "points": len(regret),
                "known": len(known),
                "mean": float(known.mean()) if len(known) else None,
                "max": float(known.max()) if len(known) else None,
                "above_1_percent": int(np.count_nonzero(known > 0.01)),
                "failed": int(np.count_nonzero(optima["header_failed"])),
            },
            "regret_against_best_known": regret_summary(optima["header_regret"]),
        }
        if len(optima) <= _LISTED_POINTS:
            columns = [
                *self.space.input_names,
                f"best_measured_{objective}",
                f"header_measured_{objective}",
                "header_measured_regret",
            ]
            details["per_point"] = [
                {
                    k: (None if isinstance(v, float) and not np.isfinite(v) else plain(v))
                    for k, v in row.items()
                }
                for row in optima[columns].to_dict("records")
            ]
        return details

    def load_selector(self) -> Selector:
        """The trees :meth:`build_trees` fitted, rebuilt from ``selector.json`` (data: nothing
        in the directory is unpickled or run), for :func:`~mlkaps_gpu.render_header`,
        validation or merge.

        The file is checked against the checksum the manifest recorded when it was written
        before it is read.

        Raises:
            CampaignError: ``selector.json`` is missing, changed since it was written, cannot be
                read or holds no selector, or the campaign predates it and keeps its trees as
                ``selector.pkl`` (never loaded); the message says how to rebuild it from the
                measurements.
        """
        selector: Selector = ReadOnlyCampaign(self.directory).load_selector()
        return selector

    def _measure(self, rows: pd.DataFrame) -> tuple[pd.DataFrame, BatchLoad | None]:
        """Run the executor on ``rows``; with the results, the machine's load while it ran
        (None for a replay, which measures nothing, for Dask workers on other machines, and
        where ``/proc`` is absent)."""
        local = self.config.execution.backend == "local"
        probe = (
            LoadProbe().start()
            if local and self.config.kernel.executor != "replay" and LoadProbe.available()
            else None
        )
        results = self.setup.executor.run(rows)
        return results, (probe.stop() if probe is not None else None)


def _tree_sizes(selector: Selector) -> dict[str, Any]:
    model = selector.model_
    return dict(zip(model.tree_names, model.trees, strict=True))


def _target_state(directory: Path, config: CampaignConfig, force: bool) -> str:
    """``"new"`` (nothing there, or a creation killed half way), ``"resume"``, or
    ``"rebuild"`` (a damaged campaign.json under ``force``); an error for anything else."""
    if directory.exists() and not directory.is_dir():
        raise CampaignError(f"{directory}: exists and is not a directory")
    if (directory / META).exists():
        try:
            meta = read_meta(directory)
        except CampaignError:
            if force:
                log.warning("%s: %s is damaged; rebuilding it (--force)", directory, META)
                return "rebuild"
            raise
        if meta.get("config_sha256") != config.digest and not force:
            raise CampaignError(
                f"{directory}: the configuration differs from the one this campaign was "
                "started with (config.toml there); use --force to resume anyway"
            )
        return "resume"
    if directory.exists() and any(directory.iterdir()) and not interrupted_creation(directory):
        raise CampaignError(f"{directory}: exists, is not empty and is not a campaign")
    return "new"


def _check_store(directory: Path, remeasure: bool, *, force: bool | None = None) -> None:
    """Refuse a missing or damaged store unless ``remeasure`` (then set it aside and start
    sampling again from an empty store). With ``force`` given (a resumed ``tune``), the
    outputs of finished stages are checked too (:func:`_check_outputs`)."""
    _check_store_file(directory, remeasure)
    if force is not None:
        _check_outputs(directory, force)


def _check_outputs(directory: Path, force: bool) -> None:
    """Refuse, unless ``force``, a finished campaign whose outputs changed or vanished since
    their stage wrote them, or whose trees are an old ``selector.pkl`` (never loaded). With
    ``force`` the stages are redone from the stored measurements (the resume clears them)."""
    meta = read_meta(directory)
    changed = changed_outputs(directory, meta)
    legacy = "trees" in meta["stages"] and SELECTOR_FILE not in meta.get("files", {})
    if not changed and not legacy:
        return
    hint = ReadOnlyCampaign(directory).rebuild_hint()
    if not force:
        if changed:
            name, problem = next(iter(changed.items()))
            raise CampaignError(
                f"{directory / name}: {problem}; the campaign's outputs are not rebuilt unless "
                f"asked: {hint}"
            )
        raise CampaignError(
            f"{directory / LEGACY_PICKLE}: the trees of this campaign were written by an older "
            f"mlkaps_gpu as a Python pickle, which is never loaded; {hint} as {SELECTOR_FILE}"
        )
    if legacy:
        log.warning(
            "%s: %s (a pickle, never loaded) is replaced; the trees stage is redone from the "
            "measurements (--force)",
            directory,
            LEGACY_PICKLE,
        )
        meta["stages"] = [s for s in meta["stages"] if s != "trees"]
        files = meta.get("files", {})
        meta["files"] = {k: v for k, v in files.items() if k != LEGACY_PICKLE}
        _write_json(directory / META, meta)
        (directory / LEGACY_PICKLE).unlink(missing_ok=True)


def _check_store_file(directory: Path, remeasure: bool) -> None:
    """The store part of :func:`_check_store`."""
    path = directory / STORE
    if not path.is_file():
        problem: str | None = f"{STORE} is missing"
    else:
        rows, integrity = _store_state(path)
        problem = store_problem(directory, rows, integrity)
    if problem is None:
        if remeasure:
            log.info("%s: the store is sound; nothing to measure again", directory)
        return
    if not remeasure:
        raise CampaignError(remeasure_hint(directory, problem))
    aside = set_aside(directory) if path.exists() else None
    log.warning(
        "%s: %s; measuring again from scratch (--remeasure)%s",
        directory,
        problem,
        f", the old store kept as {aside.name}" if aside else "",
    )
    meta = read_meta(directory)
    meta.update(stages=[], files={}, samples=0)
    _write_json(directory / META, meta)


def _store_state(path: Path) -> tuple[int | None, str | None]:
    """``(rows, integrity problem)`` of a store file, read without changing it."""
    import sqlite3

    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            rows = connection.execute("PRAGMA integrity_check").fetchall()
            problems = [str(r[0]) for r in rows if str(r[0]) != "ok"]
            if problems:
                return None, "; ".join(problems[:3])
            table = connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'samples'"
            ).fetchall()
            if not table:  # an empty file, or emptied: no measurement left
                return 0, None
            count = connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
            return int(count), None
        finally:
            connection.close()
    except sqlite3.DatabaseError as error:
        return None, str(error)


def _create_files(directory: Path, config: CampaignConfig, setup: Setup, *, rebuild: bool) -> None:
    """What a new campaign directory holds, ``campaign.json`` last (a creation killed before
    it is done again by the next run; see ``interrupted_creation``). ``rebuild`` keeps the
    store of a campaign whose manifest was damaged."""
    _atomic_write(directory / "config.toml", config.text.encode("utf-8"))
    environment = capture_environment()
    environment["replay"] = config.kernel.executor == "replay"
    _write_json(directory / ENVIRONMENT, environment)
    if rebuild:
        _check_store(directory, remeasure=False)
    try:
        rows = len(SampleStore(directory / STORE, setup.space, setup.objectives))
    except StoreError as error:
        raise CampaignError(remeasure_hint(directory, str(error))) from None
    _write_json(
        directory / META,
        {
            "config_sha256": config.digest,
            "config_dir": _config_folder(config),
            "name": config.name,
            "seed": config.seed,
            "version": __version__,
            "created": time.time(),
            "stages": [],
            "samples": rows,
            "files": {},
        },
    )


def _config_for_reading(directory: Path, text: str, base: Path) -> tuple[CampaignConfig, Setup]:
    """The configuration and setup of an existing campaign (:meth:`Campaign.open`), its
    outputs checked against their recorded checksums first.

    Where the kernel or its data files cannot be found (a campaign directory handed to someone
    else, replay files moved), a campaign whose trees are done is still read from its directory
    alone: the space comes from ``selector.json`` (its parameters and constraints), the
    settings from ``config.toml`` without its ``[kernel]`` table, and the executor refuses to
    measure, saying what it needs (the original error)."""
    ReadOnlyCampaign(directory).check_outputs()
    try:
        config = parse_config(text, path=base / "config.toml", label="config.toml")
        return config, prepare(config)
    except ConfigError as failure:
        if not (directory / SELECTOR_FILE).is_file():
            raise
        error, problem = failure, str(failure)
    import tomllib

    from mlkaps_gpu.campaign._config import ConfigFile, _campaign_config

    try:
        data = tomllib.loads(text)
        data["kernel"] = {"executor": "external"}
        data.pop("transfer", None)
        model = ConfigFile.model_validate(data, context={"base": str(base)})
    except ValueError:  # TOML and validation errors: the original error says more
        raise error from None
    config = _campaign_config(model, text, base / "config.toml", "config.toml")
    selector = ReadOnlyCampaign(directory).load_selector()
    validity = selector.model_.validity
    constraints = [] if validity is None else list(validity.constraints)
    space = Space(list(selector.inputs_), list(selector.design_), constraints)
    executor = _NoMeasurement(tuple(config.objectives), directory, problem)
    log.info(
        "%s: reading the campaign from its directory alone (%s); commands that measure are refused",
        directory,
        problem,
    )
    return config, Setup(space, executor, list(config.objectives), list(config.objectives.values()))


class _NoMeasurement(ExternalExecutor):
    """The executor of a campaign read from its directory alone: it measures nothing and says
    what measuring would need."""

    def __init__(self, objectives: tuple[str, ...], directory: Path, problem: str) -> None:
        super().__init__(objectives)
        self.directory = directory
        self.problem = problem

    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        raise CampaignError(
            f"{self.directory}: this command measures the kernel, which needs what config.toml "
            f"names and this machine lacks ({self.problem}); restore it, or use the stored "
            "measurements only"
        )


class _FailureWatch:
    """Stops a run whose first ``limit`` measurements all failed (0: never)."""

    def __init__(self, directory: Path, limit: int) -> None:
        self.directory = directory
        self.limit = int(limit)
        self.seen = 0
        self.succeeded = False
        self.first: tuple[str, str] | None = None
        self.counts: dict[str, int] = {}

    def check(self, results: pd.DataFrame) -> None:
        if self.limit <= 0 or self.succeeded:
            return
        statuses = results["status"].astype(str).tolist()
        if "ok" in statuses:
            self.succeeded = True
            return
        for status, message in zip(statuses, results["message"].astype(str), strict=True):
            self.counts[status] = self.counts.get(status, 0) + 1
            if self.first is None:
                self.first = (status, " ".join(message.split())[:300])
        self.seen += len(statuses)
        if self.seen >= self.limit:
            counts = ", ".join(f"{n} {s}" for s, n in sorted(self.counts.items()))
            status, message = self.first or ("?", "")
            raise CampaignError(
                f"{self.directory}: the first {self.seen} measurements of this run all failed "
                f"({counts}); the first one: {status}: {message or '(no message)'}. The kernel "
                "fails every time: fix it, then run the same command to resume (the failed rows "
                "stay stored; [sampling] stop_after_failures = 0 never stops)"
            )


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all or nothing (:func:`mlkaps_gpu._files.write_atomically`)
    through ``<name>.tmp`` beside it: the campaign holds its lock, and its integrity check
    knows those names."""
    write_atomically(path, data, unique=False)


def _config_folder(config: CampaignConfig) -> str | None:
    """The folder a configuration's relative paths are relative to (None without a file)."""
    path = getattr(config, "path", None)
    return str(Path(path).resolve().parent) if path is not None else None


def _write_json(path: Path, data: Any) -> None:
    _atomic_write(path, json.dumps(data, indent=2, sort_keys=True).encode())


def _atomic_csv(table: pd.DataFrame, path: Path) -> None:
    _atomic_write(path, table.to_csv(index=False).encode())


__all__ = ["Campaign", "CampaignError", "ConfigError", "STAGES"]
