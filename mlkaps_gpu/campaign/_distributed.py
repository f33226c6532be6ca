"""The sampling stage on Dask workers (``[execution] backend = "dask"``).

Where the workers come from (:func:`connect`):

* ``scheduler = "tcp://host:port"``: an existing scheduler and its workers;
* ``cluster = "local"`` (default): a ``distributed.LocalCluster`` of ``workers`` processes with
  one thread each; ``options`` go to ``LocalCluster``, except ``worker_gpus = [0, 1, ...]``,
  which starts one worker per listed device with ``CUDA_VISIBLE_DEVICES`` set to it;
* ``cluster = "slurm"``: ``dask_jobqueue.SLURMCluster(**options)`` scaled to ``workers``.

The campaign's own clusters retry a task whose worker died once
(``distributed.scheduler.allowed-failures = 1``); a task whose workers died twice is stored as
``runtime_error`` rows naming the lost worker.

Ordering (:func:`sample_distributed`): batches are asked in the sequential order, each is split
into one task per worker, and a batch is appended to the store (one transaction) and told to
the sampler only when it and every batch asked before it are complete; completions that arrive
out of order wait in memory. Samplers whose asks do not depend on results (random, LHS) ask up
to ``workers * in_flight`` batches ahead; any other sampler asks its next batch only after the
previous one is told. So, for every sampler, the store holds the same rows, in the same order
and batches, as a sequential campaign with the same seed, and resuming works the same way.
"""

from __future__ import annotations

import logging
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from mlkaps_gpu.campaign._config import CampaignConfig, ConfigError
from mlkaps_gpu.campaign._setup import prepare
from mlkaps_gpu.campaign._store import SampleStore
from mlkaps_gpu.executors import DaskExecutor, ExecutionSettings, Executor
from mlkaps_gpu.sampling import LHSSampler, RandomSampler, Sampler

if TYPE_CHECKING:
    from distributed import Client, Future

log = logging.getLogger("mlkaps_gpu")

Progress = Callable[[str, int, int], None]

#: Seconds between two looks at the cluster's size while waiting for results.
_POLL_SECONDS = 2.0
#: Worker deaths a task may be involved in before it fails, on the campaign's own clusters.
_ALLOWED_FAILURES = 1


@dataclass
class ConfigExecutorFactory:
    """Builds a campaign's executor from its configuration, on a worker."""

    config: CampaignConfig

    @property
    def key(self) -> str:
        return self.config.digest

    def __call__(self) -> Executor:
        return prepare(self.config).executor


def asks_ahead(sampler: Sampler) -> bool:
    """Whether ``sampler.ask`` ignores results, so it may ask before earlier batches are told.

    A sampler class says so with a boolean ``asks_depend_on_results`` attribute; without one,
    only the random and LHS samplers qualify (their ``_seen`` set, the only state ``ask``
    reads, is already updated by ``ask`` itself).
    """
    declared = getattr(type(sampler), "asks_depend_on_results", None)
    if isinstance(declared, bool):
        return not declared
    return type(sampler) in (RandomSampler, LHSSampler)


@contextmanager
def connect(
    execution: ExecutionSettings, *, label: str = "<config>"
) -> Iterator[tuple[Client, int]]:
    """A client of the configured cluster and the number of workers batches are split over.

    Raises:
        ConfigError: Dask (or dask-jobqueue) is missing, or the cluster options are wrong.
    """
    try:
        import dask
        from distributed import Client
    except ImportError:
        raise ConfigError(
            f"{label}: [execution] backend: 'dask' needs Dask: pip install 'mlkaps_gpu[dist]'"
        ) from None
    if execution.scheduler:
        client = Client(execution.scheduler)
        try:
            workers = max(execution.workers, len(client.nthreads()))
            log.info("dask: scheduler %s, %d workers", execution.scheduler, workers)
            yield client, workers
        finally:
            client.close()
        return
    with dask.config.set({"distributed.scheduler.allowed-failures": _ALLOWED_FAILURES}):
        cluster = _make_cluster(execution, label)
    try:
        client = Client(cluster)
        try:
            log.info("dask: %s cluster, %d workers", execution.cluster, execution.workers)
            yield client, execution.workers
        finally:
            client.close()
    finally:
        cluster.close()


def _make_cluster(execution: ExecutionSettings, label: str) -> Any:
    options = dict(execution.options)
    try:
        if execution.cluster == "slurm":
            return _slurm_cluster(execution.workers, options, label)
        return _local_cluster(execution.workers, options, label)
    except TypeError as error:
        raise ConfigError(f"{label}: [execution] options: {error}") from None


def _local_cluster(workers: int, options: dict[str, Any], label: str) -> Any:
    from distributed import LocalCluster, Nanny, Scheduler, SpecCluster

    gpus = options.pop("worker_gpus", None)
    if gpus is None and workers > 1:
        warnings.warn(
            f"{label}: [execution] workers = {workers} on a local cluster: measurements run "
            "concurrently on one machine and disturb each other's timings; keep workers = 1 "
            "unless the kernel is a model or each worker owns a device (options.worker_gpus)",
            RuntimeWarning,
            stacklevel=5,
        )
    if gpus is None:
        options.setdefault("dashboard_address", ":0")  # any free port: never clash on 8787
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, **options)
    if not isinstance(gpus, list) or len(gpus) != workers:
        raise ConfigError(
            f"{label}: [execution] options.worker_gpus: must list one device per worker "
            f"({workers}), got {gpus!r}"
        )
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0"}}
    specs = {
        index: {
            "cls": Nanny,
            "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": str(gpu)}, **options},
        }
        for index, gpu in enumerate(gpus)
    }
    return SpecCluster(workers=specs, scheduler=scheduler)


def _slurm_cluster(workers: int, options: dict[str, Any], label: str) -> Any:
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        raise ConfigError(
            f"{label}: [execution] cluster: 'slurm' needs dask-jobqueue: pip install dask-jobqueue"
        ) from None
    cluster = SLURMCluster(**options)
    cluster.scale(workers)
    return cluster


@dataclass
class _Batch:
    """One asked batch: its rows, the parts measured as separate tasks, their results."""

    rows: pd.DataFrame
    parts: list[pd.DataFrame]
    results: list[pd.DataFrame | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.results = [None] * len(self.parts)

    @property
    def complete(self) -> bool:
        return all(r is not None for r in self.results)

    def combined(self) -> pd.DataFrame:
        return pd.concat([r for r in self.results if r is not None], ignore_index=True)


def sample_distributed(
    config: CampaignConfig,
    sampler: Sampler,
    store: SampleStore,
    *,
    objectives: Sequence[str],
    done: int,
    progress: Progress | None = None,
    budget: int | None = None,
    check: Callable[[pd.DataFrame], None] | None = None,
) -> float:
    """Measure on Dask workers until the budget is spent; returns the workers' executor seconds.

    ``sampler`` has already been restored from the ``done`` stored measurements; ``budget``
    (default: ``[sampling] budget``) is the sampling stage's share of it. ``check`` sees the
    results of every stored batch and may stop the run by raising; by default it is the local
    path's watch: a run whose first ``[sampling] stop_after_failures`` measurements all
    failed stops with a :class:`~mlkaps_gpu.campaign.CampaignError` (the kernel fails every
    time), the failed rows stored.
    """
    if check is None:
        check = _failure_watch(config, store)
    execution = config.execution
    with connect(execution, label=config.path.name) as (client, workers):
        executor = DaskExecutor(
            ConfigExecutorFactory(config), client=client, objectives=objectives, chunks=workers
        )
        lookahead = workers * execution.in_flight if asks_ahead(sampler) else 1
        try:
            _measure(
                executor,
                sampler,
                store,
                budget=config.sampling.budget if budget is None else budget,
                batch_size=config.sampling.batch_size,
                lookahead=lookahead,
                done=done,
                progress=progress,
                check=check,
            )
        finally:
            executor.close()
        return executor.executor_seconds


def _measure(
    executor: DaskExecutor,
    sampler: Sampler,
    store: SampleStore,
    *,
    budget: int,
    batch_size: int,
    lookahead: int,
    done: int,
    progress: Progress | None,
    check: Callable[[pd.DataFrame], None] | None = None,
) -> None:
    """The ask -> submit -> collect -> store -> tell loop, batches kept in ask order;
    ``check`` sees each stored batch's results (it stops the run by raising)."""
    batches: deque[_Batch] = deque()  # asked, not yet stored, in ask order
    waiting: deque[tuple[_Batch, int]] = deque()  # parts not yet submitted
    running: dict[Future, tuple[_Batch, int]] = {}
    asked = done
    exhausted = False
    try:
        while True:
            while not exhausted and asked < budget and len(batches) < lookahead:
                rows = sampler.ask(min(batch_size, budget - asked))
                if len(rows) == 0:
                    log.warning(
                        "every valid configuration has been measured: stopping at %d", asked
                    )
                    exhausted = True
                    break
                batch = _Batch(rows, executor.split(rows))
                batches.append(batch)
                waiting.extend((batch, index) for index in range(len(batch.parts)))
                asked += len(rows)
            if not batches:
                return
            capacity = executor.capacity()
            while waiting and len(running) < capacity:
                batch, index = waiting.popleft()
                running[executor.submit(batch.parts[index])] = (batch, index)
            for future in _first_completed(list(running)):
                batch, index = running.pop(future)
                batch.results[index] = executor.collect(future, batch.parts[index])
            while batches and batches[0].complete:
                batch = batches.popleft()
                results = batch.combined()
                store.append(batch.rows, results)
                sampler.tell(batch.rows, results)
                done += len(batch.rows)
                if progress:
                    progress("sampling", done, budget)
                if check is not None:
                    check(results)
    except BaseException:
        executor.client.cancel(list(running))
        raise


def _failure_watch(config: CampaignConfig, store: SampleStore) -> Callable[[pd.DataFrame], None]:
    """The local path's early stop (``FailureWatch`` of the sampling stage), for this store's
    campaign directory."""
    from mlkaps_gpu.campaign._stage_sampling import FailureWatch

    return FailureWatch(store.path.parent, config.sampling.stop_after_failures).check


def _first_completed(futures: list[Future]) -> set[Future]:
    """The finished futures, waiting at most ``_POLL_SECONDS`` for the first one."""
    from distributed import wait

    try:
        return set(wait(futures, timeout=_POLL_SECONDS, return_when="FIRST_COMPLETED").done)
    except TimeoutError:
        return set()
