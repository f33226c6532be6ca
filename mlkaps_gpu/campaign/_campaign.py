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
    selector.pkl         the fitted trees
    <prefix>.h           the header, verified against the trees
    verification.json    how the header was verified
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu import __version__
from mlkaps_gpu.campaign import _ask_tell
from mlkaps_gpu.campaign._config import CampaignConfig, ConfigError, parse_config
from mlkaps_gpu.campaign._environment import (
    capture_environment,
    environment_differences,
    summary_line,
)
from mlkaps_gpu.campaign._errors import CampaignError
from mlkaps_gpu.campaign._setup import Setup, prepare
from mlkaps_gpu.campaign._store import SampleStore
from mlkaps_gpu.codegen import boundary_inputs, render_header, verify_header
from mlkaps_gpu.executors import ExternalExecutor
from mlkaps_gpu.optimize import GridOptimizer
from mlkaps_gpu.sampling import (
    SAMPLERS,
    BayesianSampler,
    GAAdaptiveSampler,
    HVSrSampler,
    HVSSampler,
    Sampler,
)
from mlkaps_gpu.surrogate import LightGBMSurrogate
from mlkaps_gpu.trees import Selector, fit_selector

log = logging.getLogger("mlkaps_gpu")

STAGES = ("sampling", "modeling", "optimization", "trees")
#: Measurements at a grid point's exact inputs from which the best of them outranks an
#: unmeasured surrogate choice.
_MEASURED_SUPPORT = 5
META = "campaign.json"
ENVIRONMENT = "environment.json"


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
        self.store = SampleStore(directory / "samples.sqlite", self.space, setup.objectives)
        fixed = config.sampling.fixed
        #: the space sampling and grids use: the full space, or one with fixed inputs
        self.sampling_space = self.space.with_fixed_inputs(fixed) if fixed else self.space
        self._transfer: pd.DataFrame | None = None

    # ---------------------------------------------------------------------- construction
    @classmethod
    def create_or_resume(
        cls, config: CampaignConfig, directory: str | Path, *, force: bool = False
    ) -> Campaign:
        """Validate everything, then create the directory or resume the one found there."""
        directory = Path(directory)
        meta_path = directory / META
        if meta_path.exists():
            meta = json.loads(meta_path.read_text())
            if meta.get("config_sha256") != config.digest and not force:
                raise CampaignError(
                    f"{directory}: the configuration differs from the one this campaign was "
                    "started with (config.toml there); use --force to resume anyway"
                )
        elif directory.exists() and any(directory.iterdir()):
            raise CampaignError(f"{directory}: exists, is not empty and is not a campaign")
        setup = prepare(config)  # raises ConfigError before anything is written
        created = not directory.exists()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            if not meta_path.exists():
                (directory / "config.toml").write_text(config.text, encoding="utf-8")
                environment = capture_environment()
                environment["replay"] = config.kernel.executor == "replay"
                _write_json(directory / ENVIRONMENT, environment)
                _write_json(
                    meta_path,
                    {
                        "config_sha256": config.digest,
                        "name": config.name,
                        "seed": config.seed,
                        "version": __version__,
                        "created": time.time(),
                        "stages": [],
                    },
                )
            else:
                for difference in cls(config, setup, directory).environment_warnings():
                    log.warning("%s: resuming on a different machine (%s)", directory, difference)
            if (
                meta_path.exists()
                and json.loads(meta_path.read_text()).get("config_sha256") != config.digest
            ):
                # --force with a changed config: keep every measurement, redo every stage
                (directory / "config.toml").write_text(config.text, encoding="utf-8")
                meta = json.loads(meta_path.read_text())
                meta.update(config_sha256=config.digest, stages=[])
                _write_json(meta_path, meta)
                log.warning("%s: configuration changed; stages will be re-run", directory)
            return cls(config, setup, directory)
        except BaseException:
            if created:
                shutil.rmtree(directory, ignore_errors=True)
            raise

    @classmethod
    def open(cls, directory: str | Path) -> Campaign:
        """Open an existing campaign directory (for select, report...)."""
        directory = Path(directory)
        if not (directory / META).exists():
            raise CampaignError(f"{directory}: not a campaign directory (no {META})")
        config = parse_config(
            (directory / "config.toml").read_text(encoding="utf-8"),
            path=directory / "config.toml",
            label="config.toml",
        )
        return cls(config, prepare(config), directory)

    # ----------------------------------------------------------------------- environment
    @property
    def environment(self) -> dict[str, Any]:
        """The recorded measurement environment (empty for directories that predate it)."""
        path = self.directory / ENVIRONMENT
        return dict(json.loads(path.read_text())) if path.exists() else {}

    def environment_warnings(self) -> list[str]:
        """Differences between the recorded measurement machine and this one (none for replay
        campaigns, whose measurements were taken elsewhere by definition)."""
        recorded = self.environment
        if not recorded or recorded.get("replay"):
            return []
        return environment_differences(recorded, capture_environment())

    # ------------------------------------------------------------------------------ meta
    @property
    def meta(self) -> dict[str, Any]:
        return dict(json.loads((self.directory / META).read_text()))

    def _mark_done(self, stage: str, **details: Any) -> None:
        meta = self.meta
        if stage not in meta["stages"]:
            meta["stages"].append(stage)
        meta.setdefault("details", {})[stage] = details
        _write_json(self.directory / META, meta)

    def _clear_after(self, stage: str) -> None:
        meta = self.meta
        keep = STAGES[: STAGES.index(stage)]
        meta["stages"] = [s for s in meta["stages"] if s in keep]
        _write_json(self.directory / META, meta)

    def done(self, stage: str) -> bool:
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
        options = self.config.sampling
        if options.method == "ga_adaptive":
            objective = self.setup.objectives[0]
            transfer = self.transfer_samples()
            return GAAdaptiveSampler(
                self.sampling_space,
                seed=self.config.seed,
                budget=options.budget,
                objective=objective,
                maximize=self.setup.directions[0] == "maximize",
                bootstrap=options.bootstrap,
                eps_initial=options.eps_initial,
                eps_final=options.eps_final,
                sub_sampler=options.sub_sampler,
                surrogate_factory=lambda: self._surrogate(objective),
                extra_training=transfer if len(transfer) else None,
                warm_start=self.config.transfer_warm_start if len(transfer) else 0.0,
            )
        if options.method in ("hvs", "hvsr"):
            kind = HVSSampler if options.method == "hvs" else HVSrSampler
            return kind(
                self.sampling_space, seed=self.config.seed, objective=self.setup.objectives[0]
            )
        if options.method == "bayes":
            return BayesianSampler(
                self.sampling_space,
                seed=self.config.seed,
                objective=self.setup.objectives[0],
                maximize=self.setup.directions[0] == "maximize",
            )
        return SAMPLERS[options.method](self.sampling_space, seed=self.config.seed)

    def sample(self, progress: Progress | None = None) -> dict[str, Any]:
        """Measure until the budget is spent (resuming from what the store holds)."""
        budget = self.config.sampling.budget
        batch_size = self.config.sampling.batch_size
        sampler = self.make_sampler()
        stored = self.store.load()
        if len(stored):
            sampler.restore(
                stored[self.space.names],
                stored.drop(columns=self.space.names),
                asks=int(stored["batch"].nunique()),
            )
            log.info("resuming sampling: %d of %d measurements already stored", len(stored), budget)
        done = len(stored)
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
            )
        else:
            while done < budget:
                rows = sampler.ask(min(batch_size, budget - done))
                if len(rows) == 0:
                    log.warning("every valid configuration has been measured: stopping at %d", done)
                    break
                begin = time.perf_counter()
                results = self.setup.executor.run(rows)
                kernel_seconds += time.perf_counter() - begin
                self.store.append(rows, results)
                sampler.tell(rows, results)
                done += len(rows)
                if progress:
                    progress("sampling", done, budget)
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

    def _surrogate(self, objective: str) -> LightGBMSurrogate:
        options = self.config.surrogate
        return LightGBMSurrogate(
            categorical_features=self.space.categorical_features,
            n_estimators=options.n_estimators,
            log_target=options.log_target,
            seed=self.config.seed,
            params=options.params,
        )

    def fit_models(self) -> dict[str, Any]:
        valid = self.training_samples()
        if len(valid) < 2:
            raise CampaignError(
                f"{self.directory}: only {len(valid)} successful measurements: nothing to learn"
            )
        features = self.space.features(valid)
        models = self.directory / "models"
        models.mkdir(exist_ok=True)
        for objective in self.setup.objectives:
            model = self._surrogate(objective).fit(features, valid[objective].to_numpy())
            model.save(str(models / f"{objective}.txt"))
        details = {"trained_on": len(valid), "transferred": len(self.transfer_samples())}
        self._clear_after("modeling")
        self._mark_done("modeling", **details)
        return details

    def load_models(self) -> list[LightGBMSurrogate]:
        return [
            LightGBMSurrogate.load(
                str(self.directory / "models" / f"{objective}.txt"),
                log_target=self.config.surrogate.log_target,
            )
            for objective in self.setup.objectives
        ]

    def grid(self) -> pd.DataFrame:
        return self.sampling_space.grid(self.config.optimization.grid)

    def optimize(self, progress: Progress | None = None) -> dict[str, Any]:
        options = self.config.optimization

        def report(done: int, total: int) -> None:
            if progress:
                progress("optimization", done, total)

        optimizer = GridOptimizer(
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
        started = time.perf_counter()
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
                optima = optimizer.run(self.load_models(), self.grid())
        else:
            optima = optimizer.run(self.load_models(), self.grid())
        method = optima.attrs.get("method", options.method)
        optima = optima[optima["n_valid"] != 0].reset_index(drop=True)
        optima["source"] = "surrogate"
        if options.prefer_measured and len(self.setup.objectives) == 1:
            # (with several objectives the choice rule weighs them all: no single-objective
            # override)
            optima = self._prefer_measured(optima)
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

    def _prefer_measured(self, optima: pd.DataFrame) -> pd.DataFrame:
        """Where measurements at a grid point's exact inputs say better, ship a measured
        configuration instead of the surrogate's choice.

        The best measured configuration at the point replaces the surrogate's choice when
        (a) that choice was measured there and did worse, (b) the best measured value is at
        least as good as the surrogate's *prediction* for its choice, or (c) the choice was
        never measured and the point holds at least ``_MEASURED_SUPPORT`` measurements (inputs
        that sampling visits repeatedly, such as a categorical GPU input). A prediction for an
        unmeasured configuration is optimistic exactly where the model errs (the optimizer's
        curse); a measurement is evidence.
        """
        objective = self.setup.objectives[0]
        sign = -1.0 if self.setup.directions[0] == "maximize" else 1.0
        valid = self.store.valid_samples()
        if valid.empty:
            return optima
        inputs = self.space.input_names
        valid = valid.assign(_score=sign * valid[objective])
        support = valid.groupby(inputs, sort=False).size().rename("_support").reset_index()
        best = valid.sort_values("_score", kind="stable").drop_duplicates(inputs)
        best = best[[*self.space.names, objective]].rename(
            columns={n: f"_best_{n}" for n in self.space.design_names}
            | {objective: "_best_measured"}
        )
        merged = optima.merge(best, on=inputs, how="left").merge(support, on=inputs, how="left")
        measured_choice = (
            valid[[*self.space.names, objective]]
            .rename(columns={objective: "_choice_measured"})
            .drop_duplicates(self.space.names)
        )
        merged = merged.merge(measured_choice, on=self.space.names, how="left")
        has_best = merged["_best_measured"].notna().to_numpy()
        choice = merged["_choice_measured"].to_numpy(dtype=float)
        best_value = sign * merged["_best_measured"].to_numpy(dtype=float)
        predicted = sign * merged[f"predicted_{objective}"].to_numpy(dtype=float)
        supported = merged["_support"].fillna(0).to_numpy() >= _MEASURED_SUPPORT
        unmeasured = np.isnan(choice)
        replace = has_best & (
            (~unmeasured & (best_value < sign * choice))
            | (unmeasured & (best_value <= predicted))
            | (unmeasured & supported)
        )
        for name in self.space.design_names:
            column = merged[name].to_numpy(dtype=object, copy=True)
            column[replace] = merged[f"_best_{name}"].to_numpy(dtype=object)[replace]
            merged[name] = pd.Series(column).astype(self.space.parameters[name].dtype)
        merged.loc[replace, "source"] = "measured"
        merged[f"measured_{objective}"] = np.where(replace, sign * best_value, choice)
        drop = [c for c in merged.columns if c.startswith("_")]
        return merged.drop(columns=drop)

    def load_optima(self) -> pd.DataFrame:
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
        return optima

    def samples_digest(self) -> str:
        table = self.store.load().drop(columns=["timestamp"])
        return hashlib.sha256(table.to_csv(index=False).encode()).hexdigest()

    @property
    def header_path(self) -> Path:
        return self.directory / f"{self.config.trees.prefix}.h"

    def build_trees(self) -> dict[str, Any]:
        """Fit the trees (mode and depth from ``[trees]``; the primary objective's surrogate
        scores configurations), write the header and verify it against the trees through cffi."""
        options = self.config.trees
        optima = self.load_optima()
        surrogate = self.load_models()[0]
        sign = -1.0 if self.setup.directions[0] == "maximize" else 1.0
        space = self.space

        def score(table: pd.DataFrame) -> np.ndarray:
            return sign * surrogate.predict(space.features(table))

        fitted = fit_selector(
            optima,
            space,
            score,
            mode=options.mode,
            max_depth=options.max_depth,
            depth_tolerance=options.depth_tolerance,
            random_state=self.config.seed,
        )
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
        header = render_header(selector, options.prefix, provenance=provenance)
        (self.directory / "build").mkdir(exist_ok=True)
        rng = np.random.default_rng(self.config.seed)
        checks = boundary_inputs(selector, options.verify_inputs, rng)
        report = verify_header(
            selector, header, checks, prefix=options.prefix, workdir=self.directory / "build"
        )
        if not report.ok:
            raise CampaignError(f"generated header failed verification: {report}")
        _atomic_write(self.directory / "selector.pkl", pickle.dumps(selector))
        _atomic_write(self.header_path, header.encode())
        details = {
            "header": self.header_path.name,
            "verified_inputs": report.n_rows,
            "mismatches": report.n_mismatches,
            "leaves": {name: int(tree.n_leaves) for name, tree in _tree_sizes(selector).items()},
            "mode": options.mode,
            "depth": fitted.sweep.chosen,
            "depth_sweep": fitted.sweep.records(),
        }
        _write_json(self.directory / "verification.json", details)
        self._mark_done("trees", **details)
        return details

    def load_selector(self) -> Selector:
        with open(self.directory / "selector.pkl", "rb") as handle:
            selector = pickle.load(handle)  # noqa: S301 - our own file, written by build_trees
        if not isinstance(selector, Selector):
            raise CampaignError(f"{self.directory}: selector.pkl holds no selector")
        return selector


def _tree_sizes(selector: Selector) -> dict[str, Any]:
    model = selector.model_
    return dict(zip(model.tree_names, model.trees, strict=True))


def _atomic_write(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def _write_json(path: Path, data: Any) -> None:
    _atomic_write(path, json.dumps(data, indent=2, sort_keys=True).encode())


def _atomic_csv(table: pd.DataFrame, path: Path) -> None:
    _atomic_write(path, table.to_csv(index=False).encode())


__all__ = ["Campaign", "CampaignError", "ConfigError", "STAGES"]
