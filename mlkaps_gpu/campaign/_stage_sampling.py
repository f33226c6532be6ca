"""The sampling stage: ask the sampler, measure, store, tell, batch by batch, until the budget
is spent.

The sampler knows nothing of the store: the stage first tells it every stored measurement
(:func:`restore_sampler`), so a resumed campaign draws what an uninterrupted one would have
drawn. Each batch is appended to the store in one transaction before the sampler is told.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from mlkaps_gpu.campaign._errors import CampaignError
from mlkaps_gpu.campaign._stage_context import Progress, StageContext
from mlkaps_gpu.campaign._store import SampleStore
from mlkaps_gpu.executors import ExternalExecutor
from mlkaps_gpu.sampling import Sampler, SamplingSettings

log = logging.getLogger("mlkaps_gpu")

#: ``[sampling] stop_after_failures`` when a configuration does not carry it.
DEFAULT_STOP_AFTER_FAILURES = 20

#: Measures on other machines: ``remote(sampler, done, budget, progress)`` -> executor seconds.
Remote = Callable[[Sampler, int, int, Progress | None], float]


def restore_sampler(sampler: Sampler, store: SampleStore) -> int:
    """Tell ``sampler`` every stored measurement, continuing as if it had asked their batches
    itself; returns how many it was told."""
    stored = store.load()
    names = sampler.space.names
    if len(stored):
        sampler.restore(
            stored[names], stored.drop(columns=names), asks=int(stored["batch"].nunique())
        )
    return len(stored)


class SamplingStage:
    """Measure until the sampling budget is spent (resuming from what the store holds).

    Args:
        context: the campaign's parts (store, executor, directory, progress).
        sampler: a new sampler (the stage restores it from the store).
        budget: measurements of the stage (the store's rows when it ends).
        batch_size: most measurements per executor call.
        stop_after_failures: stop a run whose first measurements, this many, all failed
            (0: never).
        remote: measures on other machines instead of this process (the Dask backend).
        on_stored: called after every stored batch (the campaign records the row count).
    """

    def __init__(
        self,
        context: StageContext,
        sampler: Sampler,
        *,
        budget: int,
        batch_size: int,
        stop_after_failures: int = DEFAULT_STOP_AFTER_FAILURES,
        remote: Remote | None = None,
        on_stored: Callable[[], None] | None = None,
    ) -> None:
        self.context = context
        self.sampler = sampler
        self.budget = int(budget)
        self.batch_size = int(batch_size)
        self.stop_after_failures = int(stop_after_failures)
        self.remote = remote
        self.on_stored = on_stored

    @classmethod
    def from_settings(
        cls,
        settings: SamplingSettings,
        context: StageContext,
        sampler: Sampler,
        *,
        budget: int | None = None,
        remote: Remote | None = None,
        on_stored: Callable[[], None] | None = None,
    ) -> SamplingStage:
        """The stage of ``[sampling]`` (``budget`` overrides the section's: the campaign keeps
        a share of it for the confirmation)."""
        return cls(
            context,
            sampler,
            budget=settings.budget if budget is None else budget,
            batch_size=settings.batch_size,
            stop_after_failures=settings.stop_after_failures,
            remote=remote,
            on_stored=on_stored,
        )

    def run(self) -> dict[str, Any]:
        """Measure the rest of the budget; returns the stage's details (samples, status
        counts, executor and wall seconds)."""
        context, budget = self.context, self.budget
        done = restore_sampler(self.sampler, context.store)
        if done:
            log.info("resuming sampling: %d of %d measurements already stored", done, budget)
        if isinstance(context.executor, ExternalExecutor) and done < budget:
            raise CampaignError(
                f"{context.directory}: {done} of {budget} measurements told; the campaign is "
                'measured outside (executor = "external"): ask and tell the rest first'
            )
        started = time.perf_counter()
        if self.remote is not None:
            kernel_seconds = self.remote(self.sampler, done, budget, context.progress)
        else:
            kernel_seconds = self._sample_locally(done)
        table = context.store.load()
        return {
            "samples": len(table),
            "status": {str(k): int(v) for k, v in table["status"].value_counts().items()},
            "executor_seconds": round(kernel_seconds, 3),
            "wall_seconds": round(time.perf_counter() - started, 3),
        }

    def _sample_locally(self, done: int) -> float:
        """Ask, measure in this process, store and tell until the budget is spent; stops the
        run when its first measurements all fail. Returns the executor's seconds."""
        context, budget = self.context, self.budget
        stop = FailureWatch(context.directory, self.stop_after_failures)
        kernel_seconds = 0.0
        while done < budget:
            rows = self.sampler.ask(min(self.batch_size, budget - done))
            if len(rows) == 0:
                log.warning("every valid configuration has been measured: stopping at %d", done)
                break
            begin = time.perf_counter()
            results, load = context.measure(rows)
            kernel_seconds += time.perf_counter() - begin
            context.store.append(rows, results, load)
            if self.on_stored is not None:
                self.on_stored()
            self.sampler.tell(rows, results)
            done += len(rows)
            context.report("sampling", done, budget)
            stop.check(results)
        return kernel_seconds


class FailureWatch:
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


__all__ = [
    "DEFAULT_STOP_AFTER_FAILURES",
    "FailureWatch",
    "SamplingStage",
    "restore_sampler",
]
