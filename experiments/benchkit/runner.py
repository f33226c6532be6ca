"""Running every tool of a benchmark on one case: the rows, wall times and what is missing."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchkit.cases import Case
from benchkit.metrics import geomean
from benchkit.peers import (
    optuna_rows,
    prepare_kernel_tuner_caches,
    random_search_rows,
    run_kernel_tuner,
)
from benchkit.project import run_project
from benchkit.tools import HEADER, OPTUNA, RANDOM, installed


def log(message: str) -> None:
    """A progress line on stderr."""
    print(message, file=sys.stderr, flush=True)


COLUMNS = ["tool", "case", "b", "seed", "input", "fraction", "time", "optimum", "n_evaluated"]
COLUMNS += ["status"]


@dataclass
class CaseRun:
    """The tools run on one case: their rows, wall seconds per tool, the project's ``tune``
    seconds per budget, and why a tool has no rows (``missing``)."""

    case: Case
    budgets: Sequence[int]
    seeds: Sequence[int]
    workdir: Path
    started: float
    rows: list[dict] = field(default_factory=list)
    wall: dict[str, float] = field(default_factory=dict)
    tune: dict[int, list[float]] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def done(self, tool: str, b: int | str, seed: int | str, new: list[dict], begin: float) -> None:
        """Add the seconds since ``begin`` to ``tool``'s wall time; log the score of ``new``."""
        seconds = time.perf_counter() - begin
        self.wall[tool] = self.wall.get(tool, 0.0) + seconds
        shown = HEADER if tool == "project" else tool
        score = geomean(r["fraction"] for r in new if r["tool"] == shown)
        log(
            f"[{self.case.name}] {tool} b={b} seed={seed}: geomean {score:.3f} "
            f"({seconds:.1f} s; elapsed {time.perf_counter() - self.started:.0f} s)"
        )

    def random_search(self) -> None:
        """The exact random-search rows of every budget."""
        begin = time.perf_counter()
        new = random_search_rows(self.case, self.budgets)
        self.rows += new
        at_largest = [r for r in new if r["b"] == max(self.budgets)]
        self.done(RANDOM, max(self.budgets), "exact", at_largest, begin)

    def project(self) -> None:
        """One project campaign per (b, seed): its header and best-measured rows."""
        for b in self.budgets:
            for seed in self.seeds:
                begin = time.perf_counter()
                for attempt in range(3):
                    try:
                        new, tune_seconds = run_project(self.case, b, seed, self.workdir)
                        break
                    except ImportError as error:  # the package is being restructured
                        if attempt == 2:
                            raise
                        log(f"project import failed ({error}); retrying in 60 s")
                        time.sleep(60)
                self.rows += new
                self.tune[b].append(tune_seconds)
                self.done("project", b, seed, new, begin)

    def kernel_tuner(self, strategies: Sequence[str]) -> None:
        """Each Kernel Tuner strategy at every (b, seed), on caches made once per case."""
        if not installed("kernel_tuner"):
            for strategy in strategies:
                self.missing[f"KT {strategy}"] = "not installed"
            return
        folder = self.workdir / "kernel_tuner" / self.case.name
        caches = prepare_kernel_tuner_caches(self.case, folder)
        for strategy in strategies:
            self._kernel_tuner_strategy(caches, strategy)

    def _kernel_tuner_strategy(
        self, caches: Mapping[str, tuple[Path, dict]], strategy: str
    ) -> None:
        """Every (b, seed) of one strategy; the first failure ends the strategy (``missing``)."""
        name = f"KT {strategy}"
        for b in self.budgets:
            for seed in self.seeds:
                begin = time.perf_counter()
                try:
                    new = run_kernel_tuner(self.case, caches, strategy, b, seed)
                except Exception as error:  # noqa: BLE001 - reported, not fatal
                    self.missing[name] = f"failed: {type(error).__name__}: {error}"[:120]
                    log(f"[{self.case.name}] {name} b={b} seed={seed} failed: {error}")
                    return
                self.rows += new
                self.done(name, b, seed, new, begin)

    def optuna(self) -> None:
        """Optuna TPE's rows, one study per input value and seed."""
        if not installed("optuna"):
            self.missing[OPTUNA] = "not installed"
            return
        for seed in self.seeds:
            begin = time.perf_counter()
            new = optuna_rows(self.case, self.budgets, seed)
            self.rows += new
            at_largest = [r for r in new if r["b"] == max(self.budgets)]
            self.done(OPTUNA, f"<={max(self.budgets)}", seed, at_largest, begin)


def bench_case(
    case: Case,
    budgets: Sequence[int],
    seeds: Sequence[int],
    tools: Sequence[str],
    workdir: Path,
    started: float,
) -> tuple[pd.DataFrame, dict[str, float], dict[int, list[float]], dict[str, str]]:
    """Run the ``tools`` (``--tools`` ids) on ``case``: its rows (:data:`COLUMNS`), wall seconds
    per tool, the project's ``tune`` seconds per b, and why a tool has no rows."""
    run = CaseRun(case, budgets, seeds, workdir, started, tune={b: [] for b in budgets})
    if "random_search" in tools:
        run.random_search()
    if "project" in tools:
        run.project()
    strategies = [tool[3:] for tool in tools if tool.startswith("kt_")]
    if strategies:
        run.kernel_tuner(strategies)
    if "optuna_tpe" in tools:
        run.optuna()
    return pd.DataFrame(run.rows, columns=COLUMNS), run.wall, run.tune, run.missing
