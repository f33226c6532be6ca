"""The machine's load while a batch was measured: how much CPU other processes used.

A campaign tuned while other programs compute measures another machine (issue 39: two
CPU-bound processes on the two cores for the whole campaign cost its header a quarter of the
optimum), so each batch measured in this process is stored with the CPU time other processes
used during it. That is the CPU time the kernel reports busy on the CPUs this process may run on
(``/proc/stat``) less the CPU time of this process and its descendants (its measurement workers,
the commands it ran: ``os.times`` for this process and the children it reaped, ``/proc/<pid>/stat``
for the descendants alive), divided by the batch's wall time: in cores. The tuner's own work,
however parallel, is never counted as load. Where ``/proc`` is absent nothing is recorded.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign._errors import CampaignError

#: Other processes' mean CPU use (cores) from which a stretch of measuring counts as taken
#: under sustained interference, when the CPUs were also saturated (:data:`FREE_CORES`). One
#: CPU-bound process beside the tuner uses about one core, two of them on a two-core machine at
#: least one core between them even when the tuner keeps both cores busy, while a quiet
#: machine's daemons use a few hundredths of a core: half a core is a CPU-bound process
#: competing for at least half of the time, far above the quiet machine's noise (tick rounding
#: over a second of measuring is under 0.05 core).
DISTURBED_CORES = 0.5
#: The CPUs count as saturated when the tuner and the others together left less than this
#: (cores) idle: other processes that used cores the tuner did not need (a desktop's browser
#: on a 16-core machine beside a one-threaded kernel) took nothing from the measurements.
FREE_CORES = 0.5
#: Share of the measurements in disturbed batches from which ``tune`` and the report say so:
#: one short disturbed batch (a cron job) among many is not sustained interference.
DISTURBED_SHARE = 0.1
#: Shortest stretch of measuring (seconds) judged at once: consecutive batches are pooled until
#: they last this long, since the CPU counters tick every 1/100 s (on two CPUs the estimate of a
#: 0.1 s batch is off by up to 0.4 core; of a one-second stretch, by 0.04).
MIN_SECONDS = 1.0

if TYPE_CHECKING:
    from mlkaps_gpu.campaign._campaign import Campaign

_PROC = Path("/proc")
#: Fields of a ``/proc/stat`` cpu line that are busy time: user, nice, system, irq, softirq.
_BUSY_FIELDS = (0, 1, 2, 5, 6)


@dataclass(frozen=True)
class BatchLoad:
    """The load over one measured batch.

    Attributes:
        seconds: the batch's wall time.
        other_cores: other processes' mean CPU use over it, in cores.
        own_cores: this process's and its descendants' mean CPU use, in cores.
        cpus: the CPUs this process may run on.
    """

    seconds: float
    other_cores: float
    own_cores: float
    cpus: int


class LoadProbe:
    """Counts CPU time from :meth:`start` to :meth:`stop` (None without ``/proc``)."""

    def __init__(self) -> None:
        self._cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self._tick = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self._start: tuple[float, float, float] | None = None

    @staticmethod
    def available() -> bool:
        """Whether this machine has the counters (Linux ``/proc``)."""
        return (_PROC / "stat").is_file() and (_PROC / "self" / "stat").is_file()

    def start(self) -> LoadProbe:
        self._start = self._read()
        return self

    def stop(self) -> BatchLoad | None:
        """The load since :meth:`start`; None where the counters cannot be read."""
        if self._start is None:
            return None
        end = self._read()
        begin, self._start = self._start, None
        if end is None or begin is None:
            return None
        seconds = end[0] - begin[0]
        if seconds <= 0:
            return None
        busy, own = end[1] - begin[1], end[2] - begin[2]
        return BatchLoad(
            seconds=seconds,
            other_cores=max(busy - own, 0.0) / seconds,
            own_cores=own / seconds,
            cpus=len(self._cpus),
        )

    def _read(self) -> tuple[float, float, float] | None:
        """(wall clock, busy CPU seconds of this process's CPUs, CPU seconds of this process
        tree), or None without ``/proc``."""
        try:
            busy = self._busy_seconds()
            own = self._own_seconds()
        except (OSError, ValueError, IndexError):
            return None
        return time.monotonic(), busy, own

    def _busy_seconds(self) -> float:
        wanted = {f"cpu{index}" for index in self._cpus}
        total = 0
        with open(_PROC / "stat", encoding="ascii") as handle:
            for line in handle:
                name, _, rest = line.partition(" ")
                if name in wanted:
                    fields = rest.split()
                    total += sum(int(fields[i]) for i in _BUSY_FIELDS)
        return total / self._tick

    def _own_seconds(self) -> float:
        """This process (all threads) and reaped descendants, plus live descendants with the
        descendants they reaped."""
        times = os.times()
        own = times.user + times.system + times.children_user + times.children_system
        return own + sum(self._tree_ticks(os.getpid()).values()) / self._tick

    @staticmethod
    def _tree_ticks(root: int) -> dict[int, int]:
        """utime + stime + cutime + cstime (ticks) of every live descendant of ``root``."""
        parents: dict[int, int] = {}
        ticks: dict[int, int] = {}
        for entry in _PROC.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                text = (entry / "stat").read_text(encoding="utf-8", errors="replace")
            except OSError:  # the process ended meanwhile
                continue
            # the command name (field 2) may hold spaces and parentheses: split after it
            fields = text[text.rindex(")") + 2 :].split()
            pid = int(entry.name)
            parents[pid] = int(fields[1])
            ticks[pid] = sum(int(fields[i]) for i in (11, 12, 13, 14))
        children: dict[int, list[int]] = {}
        for pid, parent in parents.items():
            children.setdefault(parent, []).append(pid)
        found: dict[int, int] = {}
        stack = list(children.get(root, []))
        while stack:
            pid = stack.pop()
            found[pid] = ticks[pid]
            stack.extend(children.get(pid, []))
        return found


def disturbed_batches(loads: pd.DataFrame) -> np.ndarray:
    """The batch numbers of a load table (:meth:`SampleStore.batch_loads`) whose measurements
    were taken under sustained interference: over the stretch of at least :data:`MIN_SECONDS`
    of measuring (consecutive batches, in order) that holds the batch, other processes used at
    least :data:`DISTURBED_CORES` on average and less than :data:`FREE_CORES` stayed idle."""
    if not len(loads):
        return np.zeros(0, dtype=np.int64)
    ordered = loads.sort_values("batch")
    seconds = ordered["seconds"].to_numpy(dtype=np.float64)
    other = ordered["other_cores"].to_numpy(dtype=np.float64) * seconds
    busy = other + ordered["own_cores"].to_numpy(dtype=np.float64) * seconds
    cpus = ordered["cpus"].to_numpy(dtype=np.float64)
    window = np.zeros(len(ordered), dtype=np.int64)
    current, length = 0, 0.0
    for index, duration in enumerate(seconds):
        window[index] = current
        length += duration
        if length >= MIN_SECONDS:
            current, length = current + 1, 0.0
    if length and not current:  # under MIN_SECONDS of measuring in all: too coarse to judge
        return np.zeros(0, dtype=np.int64)
    if length:  # a short last stretch joins the one before it
        window[window == current] = current - 1
    length_of = np.maximum(np.bincount(window, seconds), 1e-9)
    others = (np.bincount(window, other) / length_of)[window]
    idle = cpus - (np.bincount(window, busy) / length_of)[window]
    disturbed = (others >= DISTURBED_CORES) & (idle < FREE_CORES)
    return ordered["batch"].to_numpy(dtype=np.int64)[disturbed]


def campaign_interference(campaign: Campaign) -> dict[str, Any] | None:
    """:func:`interference` of a campaign's store, with the header's answers at its grid
    points once the trees are built; None when no batch has a load record."""
    loads = campaign.store.batch_loads()
    if not len(loads):
        return None
    inputs = campaign.space.input_names
    answers = None
    if campaign.done("trees"):
        try:
            points = campaign.load_optima()[inputs].drop_duplicates().reset_index(drop=True)
            chosen = campaign.load_selector().select(points).reset_index(drop=True)
        except (CampaignError, OSError, KeyError):  # a damaged output: counts only
            pass
        else:
            answers = pd.concat([points, chosen], axis=1)[campaign.space.names]
    return interference(campaign.store.load(), loads, answers, inputs)


def interference(
    samples: pd.DataFrame,
    loads: pd.DataFrame,
    answers: pd.DataFrame | None = None,
    inputs: list[str] | None = None,
) -> dict[str, Any] | None:
    """What the load record says about a campaign's measurements; None when no batch has a
    record (replays, ``/proc`` absent, stores written before the record existed).

    Args:
        samples: the stored measurements (with their ``batch`` column).
        loads: the per-batch load table.
        answers: the header's configuration at each grid point (inputs and design columns),
            to name the answers that rest on disturbed measurements.
        inputs: the input columns of ``answers``.

    Returns:
        ``measurements`` (with a record), ``disturbed`` (of them, in disturbed batches), its
        ``share``, ``sustained`` (the share is at least :data:`DISTURBED_SHARE`), the
        ``median_other_cores`` over the disturbed batches, and with ``answers``, the grid
        points (``answers_on_disturbed``, their inputs in ``points``) whose answer was
        measured there only in disturbed batches.
    """
    if not len(loads):
        return None
    recorded = samples[samples["batch"].isin(loads["batch"])]
    if not len(recorded):
        return None
    bad = disturbed_batches(loads)
    in_bad = recorded["batch"].isin(bad)
    share = float(in_bad.mean())
    other = loads.loc[loads["batch"].isin(bad), "other_cores"]
    summary: dict[str, Any] = {
        "measurements": len(recorded),
        "disturbed": int(in_bad.sum()),
        "share": share,
        "sustained": share >= DISTURBED_SHARE,
        "threshold_cores": DISTURBED_CORES,
        "median_other_cores": float(other.median()) if len(other) else None,
    }
    if answers is not None and inputs is not None and len(answers):
        names = list(answers.columns)
        measured = samples[samples["status"] == "ok"]
        flags = measured[names].assign(_bad=measured["batch"].isin(bad).to_numpy())
        # a point's answer rests on disturbed measurements when every measurement of it there
        # was taken in a disturbed batch
        rests = flags.groupby(names, dropna=False, sort=False)["_bad"].all().reset_index()
        merged = answers.merge(rests, on=names, how="left")
        on_bad = merged["_bad"].fillna(False).astype(bool).to_numpy()
        summary["answers"] = len(answers)
        summary["answers_on_disturbed"] = int(on_bad.sum())
        summary["points"] = answers.loc[on_bad, inputs].to_dict("records")
    return summary
