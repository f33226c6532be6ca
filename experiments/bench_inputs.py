"""Benchmark the header against exhaustive truth over many input points (issue 39, Build 3).

Protocol. Every tool answers one configuration per input point of the truth (off the campaign's
optimization grid too); the answer scores ``t_opt / t(answer)`` there, an answer that failed or
is not listed at the point scoring as the point's slowest listed time. Per run: the geomean over
the points, the worst point, and the points below 0.67 (about 1.5x slower than the optimum) and
below 0.9; tables give mean +- sd over the seeds.

Cases:

* ``demo``: the built-in demo kernel (``mlkaps_gpu.cli._demo.blocked_matmul``, n in [32, 512]),
  truth at 64 geometric sizes for every valid (block, order);
* ``lu``: the shipped LU through cffi over (m, n), 10 x 10 geometric points in [64, 512], the
  design reduced to nb x panel (tiles at the expert's, one thread) so that the exhaustive truth
  stays within minutes;
* ``gemm``: the shipped tiled GEMM through cffi over (m, n, k), 5 x 5 x 4 geometric points in
  [32, 256], 36 configurations (tile_m x tile_n x unroll x loop order; tile_k at the expert's,
  one thread), budget 300: three inputs and no constraint, a kernel none of the method settings
  were chosen on;
* ``gemm_cuda`` (needs a CUDA GPU and CuPy; not in ``--case all``): the shipped CUDA GEMM
  through CuPy over (m, n, k), 5 x 5 x 4 geometric points in [64, 1024], its whole design (60
  configurations of block_x x block_y x tile_k under its constraints), budget 200;
* ``mixedmm_a100``, ``flexattention_a100`` (``$MLKAPS_GPU_DATA/autoheuristic/``) and
  ``--data FILE`` (any file in PyTorch AutoHeuristic's format): pure replay, at 1, 2, 5 and 10 %
  of the measured (shape, choice) cells.

Truth of the measured cases (``demo``, ``lu``, ``gemm``, ``gemm_cuda``): every valid cell timed
with the project's own executor (the one a campaign of the same configuration times with; the
demo's with ``repeats = 7``, the cffi executor with 7 timed runs after one warm-up, the CuPy
executor with its own 10 timed launches after 2 warm-ups), in ``--passes`` passes (5 by
default: on a shared machine a slow moment adds time to a tenth of a pass's cells or more, and a
cell scored on too few passes is scored slow where the kernel is not;
``results/epyc_5pass/README.md``) over all cells in shuffled order, a cell's value in a pass
the median of the runs. It is cached
in ``results/bench_inputs_truth_<case>.csv`` with its provenance (``--remeasure-truth`` redoes
it; a cached truth whose ``machine:`` line, CPU family, model, stepping and cache included, is
not this machine's is refused unless ``--truth-from-other-machine``: the campaigns measure the
kernel here); the optimum of each pass scored on each other is printed as the noise floor.
Every row is scored on the minimum over the passes after the first (interference only adds
time), and the budgeted peers draw their cells from the first pass (decision 0034): no row is
scored on the values it chose by. With one pass (``--quick``) both are that pass.

Tools, same budget B in one run (measured cases: the campaign's budget; replay: share x
cells):

* ``project header``: a campaign through ``mlkaps_gpu.tune`` with the project's default method
  settings (measuring the real kernel live), its compiled header's answer at every point; with
  ``[sampling] method`` = lhs, random, hvs as extra rows. Replay cases: a campaign on
  ``configs/<case>_replay.toml`` once the project can replay AutoHeuristic tables, else the row
  says it is not available.
* ``project header (replay of the truth table)`` (measured cases): the same problem and
  defaults tuned on a table replay of the first pass: the budgeted peers' data, noise and input
  points.
* ``LightGBM argmin on the campaign's samples``: LightGBM on the same campaign's stored samples
  (``Campaign.store.load()``), argmin over the listed configurations per point, 5 model seeds
  averaged.
* ``fixed default``: the demo's block 32 / ijk, LU's and GEMM's experts, Inductor's default
  where known.
* ``best single configuration``: from B random cells, and with full knowledge.
* ``autotune k inputs + nearest neighbour``, ``Helion-style portfolio + tree``, ``random cells +
  LightGBM argmin``: see ``benchkit/inputs_peers.py``. For the measured cases they draw their
  measurements from the truth's first pass (a replay of it), while the project tunes live; their
  ``(measured live)`` rows (``--live-peers``, the default) draw the same cells from one pass over
  every cell measured in the run with the campaign's own kernel settings, as the campaign
  measures them. The replay cases draw from and are scored on the same medians, for every tool.

* ``PyTorch's shipped tree`` (replay cases, ``--pytorch-tree FILE``): a heuristic PyTorch
  generated from these data (``torch/_inductor/autoheuristic/artifacts/_MixedMMA100.py`` and
  the like), read as text and evaluated without torch (``benchkit/pytorch_trees.py``), 0
  measurements, trained on the whole table. Where it is unsure (or its choice is not listed at
  the shape) Inductor falls back: one row with Inductor's default there, one with autotuning
  there (the shape's optimum, at the cost of every listed choice there, counted in the row's
  name). A file whose kernel and GPU match no case run is an error.

    python experiments/bench_inputs.py --case mixedmm_a100 --quick
    python experiments/bench_inputs.py --case all --seeds 0-4
    python experiments/bench_inputs.py --data other_gpu.txt --shares 2,5
    python experiments/bench_inputs.py --case mixedmm_a100 --pytorch-tree _MixedMMA100.py
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from benchkit import inputs_noise as noise
from benchkit import inputs_peers as peers
from benchkit.configs import apply_override
from benchkit.inputs_replay import header_choices, inductor_default, walk_ranking
from benchkit.inputs_report import markdown_tables, summarize_rows, write_figure
from benchkit.inputs_truth import (
    Truth,
    autoheuristic_metadata,
    autoheuristic_truth,
    point_fractions,
    read_autoheuristic,
    summarize_fractions,
)
from benchkit.provenance import header, machine, provenance, recorded
from benchkit.pytorch_trees import LearnedTree, TreeFileError, read_learned_tree, tree_answers

HERE = Path(__file__).resolve().parent

RESULTS = HERE / "results"
CONFIGS = HERE / "configs"
AH_FILES = {
    "mixedmm_a100": "mixedmm_a100.txt.gz",
    "flexattention_a100": "flexattention_a100.txt.gz",
}
MEASURED_CASES = ("demo", "lu", "gemm")
#: Measured cases that need a CUDA GPU and CuPy (not in ``--case all``).
GPU_CASES = ("gemm_cuda",)
EXTRA_SAMPLERS = ("lhs", "random", "hvs")
MODEL_SEEDS = 5
HEADER = "project header"
#: The replay header's first answer alone, where the data does not list it at a point included.
HEADER_FIRST = f"{HEADER} (first answer only)"
CAMPAIGN_LGBM = "LightGBM argmin on the campaign's samples"
TRUTH_REPLAY = f"{HEADER} (replay of the truth table)"
#: The same on a replay of the pass the ``(measured live)`` peers draw from.
LIVE_REPLAY = f"{HEADER} (replay of the live pass)"
#: Full knowledge of that pass: its optimum at every point.
LIVE_OPTIMUM = "every cell measured once, live: its optimum"
#: The live campaign whose inputs are listed at the truth's points (``--listed-inputs``).
LISTED = "project header (inputs listed at the truth's points)"
#: Suffix of the budgeted peers drawing from cells measured live like the campaign's.
LIVE = " (measured live)"
#: Shuffle seeds of the live passes (``LIVE_SEED + seed``), apart from the truth's passes.
LIVE_SEED = 1000
FIXED = "fixed default"
SINGLE_FULL = "best single configuration (full knowledge)"
NOT_LANDED = "project header: not available yet (table replay not landed)"
#: how each peer measures and answers (the notes of every results file)
PEER_NOTES = (
    "Budget B counts (input point, configuration) cells, failed ones included; every budgeted "
    "peer gets the same B per seed and draws its cells from the truth table.",
    "best single configuration (from B random cells): the configuration closest to the best "
    "sampled at the points where two or more cells succeeded (mean log ratio; a configuration "
    "not listed at such a point counts as its slowest); (full knowledge): the best geomean over "
    "every point.",
    "autotune k inputs + nearest neighbour: k = B / (mean listed configurations per point) points "
    "tuned fully, chosen as k-means medoids in the scaled log space of the numeric inputs "
    "(categorical inputs separated first); each point answers the fastest configuration of its "
    "nearest tuned point (log distance, same categorical values when a tuned point has them) "
    "that it lists.",
    "Helion-style portfolio + tree: the same kind of tuned points, a portfolio of at most 10 "
    "configurations added greedily for the lowest worst slowdown over them, a depth-6 "
    "DecisionTreeClassifier from the inputs (log numeric, categorical codes) to the portfolio "
    "entry; a point answers the listed entry of highest leaf share.",
    "project header (table replays): at each point the first configuration of the header's "
    "ranking (`<prefix>_ranked`: its answer, then its other configurations in the order the "
    "point's leaf ranks them) that the point lists, as PyTorch's AutoHeuristic takes its first "
    "ranked choice the shape generates; (first answer only): `<prefix>_select`'s answer "
    "wherever it is listed or not.",
    "random cells + LightGBM argmin: B random listed cells, LightGBM (300 trees, 31 leaves) on "
    "log time from input and design features (a failed cell: the worst log time seen + log 2), "
    "argmin over the configurations listed at each point.",
)


def log(message: str) -> None:
    print(message, flush=True)


def parse_seeds(text: str) -> list[int]:
    """``0-4`` or ``0,2,5`` (or both: ``0-2,7``)."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        seeds += list(range(int(low), int(high or low) + 1))
    return seeds


def summary_row(
    case: str,
    budget_label: str,
    budget: int,
    tool: str,
    seed: Any,
    fractions: np.ndarray,
    tune_seconds: float = math.nan,
) -> dict:
    """One run's scores (``tune_seconds``: a project campaign's tuning time)."""
    return {
        "case": case,
        "budget": budget_label,
        "B": budget,
        "tool": tool,
        "seed": seed,
        "points": len(fractions),
        **summarize_fractions(fractions),
        "tune_seconds": tune_seconds,
    }


def fixed_answers(truth: Truth, design: dict[str, Any]) -> np.ndarray:
    """The fixed default's configuration index at every point."""
    table = pd.DataFrame([design] * truth.n_points)
    return truth.config_index(table[list(truth.configs.columns)])


def replay_config(case: str, data: Path) -> tuple[dict[str, Any], Path] | None:
    """The project's replay configuration of an AutoHeuristic file and where it counts as
    read from: ``configs/<case>_replay.toml`` where it exists, else the minimal one it holds
    (the file, its objective, a prefix) for any other file. None until the project can replay
    such tables (``mlkaps_gpu.executors.load_autoheuristic``)."""
    import tomllib

    import mlkaps_gpu.executors as executors

    if not hasattr(executors, "load_autoheuristic"):
        return None
    path = CONFIGS / f"{case}_replay.toml"
    if path.is_file():
        return tomllib.loads(path.read_text()), path
    prefix = re.sub(r"\W", "_", case)
    config = {
        "campaign": {"name": f"{prefix}_replay", "seed": 0},
        "kernel": {
            "executor": "replay",
            "format": "autoheuristic",
            "objective": "time",
            "files": str(data.resolve()),
        },
        "objectives": {"time": "minimize"},
        "sampling": {"budget": 1},
        "trees": {"prefix": prefix if prefix[:1].isalpha() else f"k_{prefix}"},
    }
    return config, data.resolve().parent / f"{case}_replay.toml"


def replay_header_answers(
    case: str,
    replay: tuple[dict[str, Any], Path],
    truth: Truth,
    budget: int,
    seed: int,
    workdir: Path,
    max_configs: int | str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """A campaign on the replay configuration at budget B (``[trees] max_configs`` set where
    given); its header's first answer at every point, and the first answer of its ranking
    (``<prefix>_ranked``) that the point lists (the first answer where the header ranks
    nothing)."""
    from benchkit.configs import to_toml

    import mlkaps_gpu
    from mlkaps_gpu.codegen import CompiledHeader

    data = copy.deepcopy(replay[0])
    data.setdefault("campaign", {})["seed"] = seed
    data.setdefault("sampling", {})["budget"] = budget
    if max_configs is not None:
        data.setdefault("trees", {})["max_configs"] = max_configs
    text = to_toml(data)
    workdir.mkdir(parents=True, exist_ok=True)
    path = (
        workdir
        / f"{case}_B{budget}_s{seed}{'' if max_configs is None else f'_k{max_configs}'}.toml"
    )
    path.write_text(text)
    config = mlkaps_gpu.parse_config(text, path=replay[1], label=replay[1].name)
    campaign = mlkaps_gpu.tune(config, out=workdir / path.stem)
    compiled = CompiledHeader(
        campaign.load_selector(),
        campaign.header_path.read_text(),
        prefix=campaign.config.trees.prefix,
        build_dir=workdir / path.stem / "build",
    )
    first = header_choices(truth, compiled(truth.inputs.copy()))
    if not compiled.ranks:
        return first, first
    frames, counts = compiled.ranked(truth.inputs.copy())
    ranked = [header_choices(truth, frame) for frame in frames]
    return first, walk_ranking(truth, ranked, counts)


def bench_replay(
    case: str,
    path: Path,
    seeds: Sequence[int],
    shares: Sequence[float],
    workdir: Path,
    *,
    project: bool = True,
    max_configs: int | str | None = None,
    pytorch_trees: Sequence[LearnedTree] = (),
    settings: Sequence[str] = (),
) -> tuple[list[dict], dict[str, np.ndarray], Truth, list[str]]:
    """Rows of every tool at every share; per-point fractions (mean over seeds) at the largest
    share for the figure; the truth; notes. ``pytorch_trees``: PyTorch's shipped heuristics,
    scored where their kernel and GPU are the data's. ``settings``: ``--set`` assignments of
    the project's campaigns."""
    meta, _ = read_autoheuristic(path)
    truth = autoheuristic_truth(path, name=case)
    log(f"{case}: {truth.n_points} shapes, {len(truth.configs)} choices, {truth.n_cells} cells")
    notes = [
        f"Data: `{path.name}` ({truth.n_points} shapes, {len(truth.configs)} choices, "
        f"{truth.n_cells} measured (shape, choice) cells; the median of the repeats per cell, "
        "read by this script's own reader). Pure replay: no timing."
    ]
    try:
        floors = noise.summary(noise.noise_floor(noise.repeats_table(path)))
        notes.append(
            f"Noise floor of the table's own repeats (`noise_floor_inputs.py`): {floors} (each "
            "shape's fastest choice by one repeat scored on another; every cell measured once, "
            "scored on the other repeats)."
        )
    except ValueError:
        notes.append("No noise floor: the file holds one measurement per cell.")
    replay = replay_config(case, path) if project else None
    if replay is not None:
        for assignment in settings:
            apply_override(replay[0], assignment)
    if not project:
        log("project header: not run (--skip-project)")
        notes.append(
            "The project header row was not run (`--skip-project`): peers only; the same "
            "command without it adds the row."
        )
    elif replay is None:
        log(NOT_LANDED)
        notes.append(
            "The project header row is absent: "
            + NOT_LANDED.split(": ", 1)[1]
            + " (no `mlkaps_gpu.executors.load_autoheuristic`)."
        )
    else:
        source = (
            f"`configs/{replay[1].name}`"
            if replay[1].parent == CONFIGS
            else "a configuration made for the file (replay, format autoheuristic, objective time)"
        )
        changed = (
            "every other method setting the project's default"
            if not settings
            else "with " + ", ".join(f"`{assignment}`" for assignment in settings)
        )
        notes.append(
            f"project header: a campaign on {source} (budget and seed set per run, "
            f"{changed}), its compiled header's answer at every shape."
        )
    rows: list[dict] = []
    curves: dict[str, list[np.ndarray]] = {}
    largest = max(shares)
    single = peers.best_single_full(truth)
    default = inductor_default(meta, truth)
    shipped = pytorch_tree_rows(
        [tree for tree in pytorch_trees if tree.matches(meta)], truth, default, notes
    )
    for share in shares:
        budget = max(1, int(round(share / 100 * truth.n_cells)))
        label = f"{share:g} % (B = {budget})"
        deterministic = [(SINGLE_FULL, np.full(truth.n_points, single))]
        if default is not None:
            deterministic.append(default)
        deterministic.extend(shipped)
        for tool, answers in deterministic:
            fractions = point_fractions(truth, answers)
            rows.append(summary_row(case, label, budget, tool, "-", fractions))
            if share == largest:
                curves.setdefault(tool, []).append(fractions)
        for seed in seeds:
            started = time.perf_counter()
            by_tool = peers.peer_answers(truth, budget, np.random.default_rng([seed, budget]))
            seconds: dict[str, float] = {}
            if replay is not None:
                tuning = time.perf_counter()
                first, walked = replay_header_answers(case, replay, truth, budget, seed, workdir)
                by_tool = {HEADER: walked, HEADER_FIRST: first, **by_tool}
                seconds[HEADER] = time.perf_counter() - tuning
                if max_configs is not None:
                    bounded = f"{HEADER} (max_configs = {max_configs})"
                    by_tool[bounded] = replay_header_answers(
                        case, replay, truth, budget, seed, workdir, max_configs
                    )[1]
            for tool, chosen in by_tool.items():
                fractions = point_fractions(truth, chosen)
                rows.append(
                    summary_row(
                        case, label, budget, tool, seed, fractions, seconds.get(tool, math.nan)
                    )
                )
                if share == largest:
                    curves.setdefault(tool, []).append(fractions)
            log(f"  {label} seed {seed}: {time.perf_counter() - started:.1f} s")
    if default is None:
        notes.append(
            "No fixed-default row: Inductor's default for this kernel and GPU is not known here."
        )
    else:
        notes.append(f"{default[0]}: what Inductor runs without autotuning.")
    return rows, {k: np.mean(v, axis=0) for k, v in curves.items()}, truth, notes


def pytorch_tree_rows(
    trees: Sequence[LearnedTree],
    truth: Truth,
    default: tuple[str, np.ndarray] | None,
    notes: list[str],
) -> list[tuple[str, np.ndarray]]:
    """The answers of each shipped tree, unsure shapes at Inductor's default (where known) and
    autotuned; a note per tree (where it is sure, what autotuning the rest costs)."""
    rows: list[tuple[str, np.ndarray]] = []
    listed = ~np.isnan(truth.times)
    optimum = np.argmin(np.where(listed, truth.times, np.inf), axis=1)
    for tree in trees:
        chosen, sure = tree_answers(tree, truth, None if default is None else default[1])
        unsure = ~sure
        cells = int(listed[unsure].sum())
        name = f"PyTorch's shipped tree {tree.class_name}"
        if default is not None:
            rows.append((f"{name} (unsure: Inductor's default)", chosen))
        rows.append((f"{name} (unsure: autotuned, {cells} cells)", np.where(sure, chosen, optimum)))
        notes.append(
            f"{name}: {tree.describe()}, {len(tree.choices)} choices, trained by PyTorch on "
            f"these data (0 measurements here); sure at {int(sure.sum())} of "
            f"{truth.n_points} shapes; elsewhere Inductor's fallback: its default"
            + ("" if default is not None else " (not known here: no row)")
            + f", or autotuning every listed choice there ({cells} cells, "
            f"{cells / truth.n_cells:.1%} of the table)."
        )
    return rows


# ------------------------------------------------------------------------ measured cases
def truth_path(case: str, quick: bool, results: Path = RESULTS) -> Path:
    return results / f"bench_inputs_{'quick_' if quick else ''}truth_{case}.csv"


class TruthMachineError(Exception):
    """A cached truth measured on another machine than the one the campaigns measure on."""


def load_or_measure_truth(
    problem: Any,
    path: Path,
    passes: int,
    remeasure: bool,
    argv: Sequence[str] | None,
    other_machine: bool = False,
) -> pd.DataFrame:
    """The cached cells of a measured case, or a new measurement written there first.

    Raises:
        TruthMachineError: the cached truth was measured on another machine than this one (its
            ``machine:`` line): the project's campaigns measure the kernel here, live, and would
            be scored against another machine's times.
    """
    if path.is_file() and not remeasure:
        log(f"{problem.name}: truth from {path}")
        measured_on = recorded(path, "machine")
        here = machine()
        if measured_on is not None and measured_on != here and not other_machine:
            raise TruthMachineError(
                f"{path}: the truth was measured on '{measured_on}', this machine is '{here}': "
                "the project's campaigns measure the kernel here and would be scored against "
                "another machine's times; measure the truth here (--remeasure-truth), or "
                "score anyway (--truth-from-other-machine)"
            )
        return pd.read_csv(path, comment="#")
    from benchkit import inputs_project as project

    log(f"{problem.name}: measuring the truth ({len(problem.points)} points, {passes} passes)")
    cells = project.measure_truth(problem, passes, log=log)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = provenance(list(argv) if argv is not None else None)
    lines.append(
        f"truth: every valid cell, {passes} passes in shuffled order, median of "
        f"{problem.truth_repeats} timed runs per pass; time = minimum over the passes"
    )
    path.write_text(header(lines) + cells.to_csv(index=False))
    return cells


def bench_measured(
    problem: Any,
    cells: pd.DataFrame,
    seeds: Sequence[int],
    samplers: Sequence[str | None],
    workdir: Path,
    live_peers: bool = False,
    listed_inputs: bool = False,
) -> tuple[list[dict], dict[str, np.ndarray], Truth, list[str]]:
    """Rows of every tool at the campaign's budget; per-point fractions (mean over seeds).
    ``live_peers``: the budgeted peers also draw their cells from one pass over every cell
    measured live (per seed) with the campaign's own kernel settings, as the campaign
    measures. ``listed_inputs``: also a live campaign whose inputs are listed at the truth's
    points (:func:`~benchkit.inputs_project.listed_inputs_problem`)."""
    from benchkit import inputs_project as project

    table, truth, independent = project.table_and_scoring(problem, cells)
    budget = problem.budget
    label = f"B = {budget}"
    case = problem.name
    repeats = problem.config["kernel"].get("repeats", "the executor's default")
    if independent:
        drawn = (
            f"Scored on: the minimum over the passes other than `{project.TABLE_PASS}`; the "
            f"budgeted peers (and the truth replay) draw their cells from `{project.TABLE_PASS}`"
            ", one pass as the campaign measures, so that no row is scored on the values it "
            "chose by (decision 0034)."
        )
    else:
        drawn = (
            "Scored on: the truth's one pass, which the budgeted peers also draw their cells "
            "from (they are scored on the values they chose by: measure two passes or more to "
            "score them out of sample)."
        )
    notes = [
        f"Truth: {truth.n_points} input points x every valid configuration "
        f"({truth.n_cells} cells), measured with the project's executor; a cell's time is the "
        "median of the timed runs, one value per pass.",
        drawn,
        "The project header tunes live with the real kernel; the budgeted peers draw their "
        "measurements from the table (a replay of it).",
        "Campaigns: the configuration's problem with the project's default method settings "
        f"(kernel section as configured: repeats = {repeats}); "
        "`project header (sampling X)` rows set only `[sampling] method = X`.",
        f"{CAMPAIGN_LGBM}: LightGBM (as in the random-cells peer) fitted on that campaign's "
        f"stored samples (`Campaign.store.load()`), {MODEL_SEEDS} model seeds, each metric "
        "averaged over them.",
    ]
    for floor in project.noise_floor(problem, cells):
        notes.append(
            f"Noise floor: the optimum of {floor['chosen on']} scored on {floor['scored on']}: "
            f"geomean {floor['geomean']:.3f}, worst point {floor['worst']:.3f}, "
            f"{floor['below_0.67']:.0f} points below 0.67."
        )
        log(notes[-1])
    if independent:
        floor = project.optimum_on(table, truth)
        notes.append(
            f"The table's optimum at every point ({project.TABLE_PASS}) scored like every row: "
            f"geomean {floor['geomean']:.3f}, worst point {floor['worst']:.3f} (a tuner "
            "measuring every cell once)."
        )
        log(notes[-1])
    rows: list[dict] = []
    curves: dict[str, list[np.ndarray]] = {}

    def add(tool: str, seed: Any, fractions: np.ndarray, seconds: float = math.nan) -> None:
        rows.append(summary_row(case, label, budget, tool, seed, fractions, seconds))
        curves.setdefault(tool, []).append(fractions)

    add(FIXED, "-", point_fractions(truth, fixed_answers(truth, problem.default)))
    add(
        SINGLE_FULL,
        "-",
        point_fractions(truth, np.full(truth.n_points, peers.best_single_full(truth))),
    )
    for seed in seeds:
        for method in samplers:
            suffix = "" if method is None else f" (sampling {method})"
            started = time.perf_counter()
            result = project.run_campaign(problem, truth, seed, method, workdir)
            log(
                f"  {case} seed {seed} sampler {method or 'default'}: "
                f"tuned in {result.tune_seconds:.0f} s"
            )
            add(
                HEADER + suffix,
                seed,
                point_fractions(truth, result.answers),
                result.tune_seconds,
            )
            per_model = [
                point_fractions(
                    truth,
                    peers.lightgbm_argmin(truth, result.samples, result.sample_times, seed=model),
                )
                for model in range(MODEL_SEEDS)
            ]
            summaries = [summarize_fractions(f) for f in per_model]
            averaged = {k: float(np.mean([s[k] for s in summaries])) for k in summaries[0]}
            rows.append(
                {
                    "case": case,
                    "budget": label,
                    "B": budget,
                    "tool": CAMPAIGN_LGBM + suffix,
                    "seed": seed,
                    "points": truth.n_points,
                    **averaged,
                }
            )
            curves.setdefault(CAMPAIGN_LGBM + suffix, []).append(np.mean(per_model, axis=0))
            log(f"    scored in {time.perf_counter() - started - result.tune_seconds:.0f} s")
        if listed_inputs:  # live, sampling and deciding at the truth's points
            result = project.run_campaign(
                project.listed_inputs_problem(problem), truth, seed, None, workdir
            )
            log(f"  {case} seed {seed} inputs listed: tuned in {result.tune_seconds:.0f} s")
            add(LISTED, seed, point_fractions(truth, result.answers), result.tune_seconds)
        if samplers:  # the project's defaults on the peers' data
            replayed = project.run_truth_replay(
                problem,
                cells,
                truth,
                seed,
                workdir,
                column=project.TABLE_PASS if independent else "time",
            )
            log(f"  {case} seed {seed} replay of the truth: tuned in {replayed.tune_seconds:.0f} s")
            add(TRUTH_REPLAY, seed, point_fractions(truth, replayed.answers), replayed.tune_seconds)
        drawn_answers = peers.peer_answers(table, budget, np.random.default_rng([seed, budget]))
        for tool, chosen in drawn_answers.items():
            add(tool, seed, point_fractions(truth, chosen))
        if live_peers:
            live_answers, live_cells, live_table = live_peer_answers(problem, truth, seed)
            for tool, chosen in live_answers.items():
                add(tool + LIVE, seed, point_fractions(truth, chosen))
            add(
                LIVE_OPTIMUM,
                seed,
                point_fractions(truth, project.optimum_answers(live_table, truth)),
            )
            if samplers:  # the project's defaults on the live peers' data
                replayed = project.run_truth_replay(
                    problem,
                    live_cells,
                    truth,
                    seed,
                    workdir,
                    column="time_pass0",
                    name=f"live{seed}",
                )
                log(
                    f"  {case} seed {seed} replay of the live pass: tuned in "
                    f"{replayed.tune_seconds:.0f} s"
                )
                add(LIVE_REPLAY, seed, point_fractions(truth, replayed.answers))
    if live_peers:
        notes.append(
            f"`... {LIVE.strip()}` rows: the same budgeted peers (same B, same random draws), "
            "drawing their cells from one pass over every valid cell measured live in this "
            f"run (per seed, shuffled order) with the campaign's own kernel settings "
            f"(repeats = {repeats}), as the campaign measures; scored on the truth like "
            "every row."
        )
        notes.append(
            f"{LIVE_OPTIMUM}: that live pass's optimum at every point (a tuner measuring "
            "every cell once, live), scored like every row: what the data measured live can "
            "tell about the truth."
        )
        if samplers:
            notes.append(
                f"{LIVE_REPLAY}: as the replay of the truth table, on that live pass (the "
                "`(measured live)` peers' data): the project's decisions on data measured live "
                "by the same run, without the campaign's own sampling and re-measuring."
            )
    if listed_inputs:
        notes.append(
            f"{LISTED}: the same problem and method settings, measured live, with each input "
            "declared as the values the truth's points take along it and a grid of every "
            "value: it samples and decides at the points the budgeted peers draw their cells "
            "from."
        )
    if samplers:
        notes.append(
            f"{TRUTH_REPLAY}: the same problem and method settings (the project's defaults), "
            'tuned on a replay of the table (`format = "csv"`, `input_columns`): the '
            "budgeted peers' data, with its noise and its input points (the grid is the truth's "
            "points); its compiled header's answer at every point."
        )
    notes += header_against_campaign_model(rows)
    return rows, {k: np.mean(v, axis=0) for k, v in curves.items()}, truth, notes


def live_peer_answers(
    problem: Any, truth: Truth, seed: int
) -> tuple[dict[str, np.ndarray], pd.DataFrame, Truth]:
    """The budgeted peers' answers (as the truth indexes configurations) when the cells they
    draw are measured live like the campaign's: one pass over every valid cell with the
    campaign's kernel settings, the peers' draws as on the truth table. Also that pass's
    cells (column ``time_pass0``) and its table."""
    from benchkit import inputs_project as project

    cells = project.measure_truth(problem, 1, seed=LIVE_SEED + seed, log=log, for_truth=False)
    live = project.truth_of(problem, cells, "time_pass0")
    differ = project.cells_differ(live, truth)
    if differ:
        raise RuntimeError(
            f"{problem.name}: the live pass: {differ}: measure the truth again (--remeasure-truth)"
        )
    budget = problem.budget
    answers = peers.peer_answers(live, budget, np.random.default_rng([seed, budget]))
    return answers, cells, live


def header_against_campaign_model(rows: Sequence[dict]) -> list[str]:
    """Done-when 1(b) of issue 39, per sampler: the runs where the header is more than 0.02
    below the LightGBM argmin fitted on the same campaign's samples, and those where the header
    has a point below 0.67 while that argmin (averaged over its model seeds) has none."""
    frame = pd.DataFrame(rows)
    notes = []
    for tool in frame["tool"].unique():
        if not str(tool).startswith(HEADER):
            continue
        suffix = str(tool)[len(HEADER) :]
        mine = frame[frame["tool"] == tool].set_index("seed")
        model = frame[frame["tool"] == CAMPAIGN_LGBM + suffix].set_index("seed")
        seeds = mine.index.intersection(model.index)
        if len(seeds) == 0:
            continue
        gap = mine.loc[seeds, "geomean"] - model.loc[seeds, "geomean"]
        worse = int((gap < -0.02).sum())
        slow = int(
            ((mine.loc[seeds, "below_0.67"] > 0) & (model.loc[seeds, "below_0.67"] == 0)).sum()
        )
        notes.append(
            f"{tool} against {CAMPAIGN_LGBM}: geomean difference {gap.mean():+.3f} (min "
            f"{gap.min():+.3f}); runs more than 0.02 below: {worse} of {len(seeds)}; runs with a "
            f"point below 0.67 where the model's argmin has none: {slow} of {len(seeds)}."
        )
    return notes


def write_results(
    case: str,
    rows: list[dict],
    curves: dict[str, np.ndarray],
    truth: Truth,
    notes: Sequence[str],
    stem: str,
    lines: list[str],
    seconds: float,
    results: Path = RESULTS,
) -> None:
    frame = pd.DataFrame(rows)
    results.mkdir(parents=True, exist_ok=True)
    csv = results / f"{stem}.csv"
    csv.write_text(header(lines) + frame.to_csv(index=False))
    summary = summarize_rows(frame)
    text = [f"# bench_inputs: {case}", "", header(lines, markdown=True).rstrip(), ""]
    text += [
        "Fraction of the optimum t_opt / t(answer) at every input point of the truth (an answer "
        "that failed or is not listed at a point scores as its slowest listed time); geomean "
        "and worst over the points, mean ± sd over the seeds (deterministic tools: one run).",
        "",
        *markdown_tables(summary),
        "## Notes",
        "",
        *(f"- {note}" for note in notes),
        *(f"- {note}" for note in PEER_NOTES),
        f"- Wall time of this case: {seconds:.0f} s.",
        f"- Figure: `{stem}.png` (mean over the seeds at the largest budget).",
        "",
    ]
    (results / f"{stem}.md").write_text("\n".join(text))
    write_figure(truth, curves, results / f"{stem}.png", f"{case}: fraction of optimum per input")
    log(f"{case}: wrote {csv} (.md, .png)")
    for line in markdown_tables(summary):
        log(line)


# ------------------------------------------------------------------------ command line
def data_root(parser: argparse.ArgumentParser) -> Path:
    root = os.environ.get("MLKAPS_GPU_DATA")
    if not root:
        parser.error("the AutoHeuristic cases need MLKAPS_GPU_DATA (the replay data folder)")
    return Path(root) / "autoheuristic"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--case", choices=[*MEASURED_CASES, *GPU_CASES, *AH_FILES, "all"], default=None
    )
    parser.add_argument(
        "--data", type=Path, action="append", default=[], help="an AutoHeuristic file"
    )
    parser.add_argument("--seeds", default="0-4")
    parser.add_argument("--shares", default="1,2,5,10", help="percent of the cells (replay cases)")
    parser.add_argument(
        "--passes", type=int, default=5, help="truth passes (measured cases; at least 2)"
    )
    parser.add_argument(
        "--budget", type=int, default=None, help="the lu / gemm / gemm_cuda campaign's budget"
    )
    parser.add_argument("--quick", action="store_true", help="tiny settings for a smoke run")
    parser.add_argument("--remeasure-truth", action="store_true")
    parser.add_argument(
        "--truth-from-other-machine",
        action="store_true",
        help="score live campaigns against a cached truth measured on another machine (by "
        "default refused: its provenance's machine line must be this machine's)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--tag", default="", help="appended to the results files' names")
    parser.add_argument(
        "--samplers",
        default=None,
        help="sampling methods of the measured cases' campaigns, `default` = the project's "
        "(default: default,lhs,random,hvs; with --quick: default)",
    )
    parser.add_argument(
        "--skip-project", action="store_true", help="peers only (no campaign of the project)"
    )
    parser.add_argument(
        "--live-peers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measured cases: also the budgeted peers on cells measured live like the campaign's "
        "(one pass per seed; not with --quick)",
    )
    parser.add_argument(
        "--listed-inputs",
        action="store_true",
        help="measured cases: also a live campaign whose inputs are listed at the truth's "
        "points, with a grid of every value (it samples where the budgeted peers draw)",
    )
    parser.add_argument(
        "--max-configs",
        type=lambda text: text if text in ("auto", "none") else int(text),
        default=None,
        help="replay cases: also a project row with [trees] max_configs set to this "
        '(an integer, "auto" or "none")',
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="a configuration setting of every campaign of the project (repeatable; the "
        "live and truth-replay campaigns of a measured case, the replay campaigns of a table), "
        "e.g. trees.max_configs=auto",
    )
    parser.add_argument(
        "--pytorch-tree",
        type=Path,
        action="append",
        default=[],
        help="replay cases: a heuristic file PyTorch's AutoHeuristic generated (a peer row, "
        "read without torch)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="campaign folders (default: temporary)"
    )
    args = parser.parse_args(argv)
    if args.case is None and not args.data:
        parser.error("give --case and/or --data")
    for assignment in args.set:
        try:
            apply_override({}, assignment)
        except ValueError as error:
            parser.error(str(error))
    trees = []
    for path in args.pytorch_tree:
        try:
            trees.append(read_learned_tree(path))
        except TreeFileError as error:
            parser.error(f"--pytorch-tree: {error}")
    seeds = parse_seeds(args.seeds)
    shares = [float(s) for s in args.shares.split(",")]
    if args.quick:
        seeds, shares = seeds[:1], [max(shares)]
    cases = (
        [*MEASURED_CASES, *AH_FILES] if args.case == "all" else ([args.case] if args.case else [])
    )
    passes = 1 if args.quick else max(2, args.passes)
    recorded = [sys.argv[0], *(argv if argv is not None else sys.argv[1:])]
    started_lines = provenance(recorded)  # the commit and load when the run starts
    with tempfile.TemporaryDirectory(prefix="bench_inputs_") as scratch:
        workdir = args.workdir or Path(scratch)
        project = not args.skip_project
        jobs: list[tuple[str, Callable[[], tuple]]] = []

        def replay_job(case: str, path: Path) -> Callable[[], tuple]:
            return partial(
                bench_replay,
                case,
                path,
                seeds,
                shares,
                workdir,
                project=project,
                max_configs=args.max_configs,
                pytorch_trees=trees,
                settings=args.set,
            )

        for case in cases:
            job: Callable[[], tuple]
            if case in AH_FILES:
                job = replay_job(case, data_root(parser) / AH_FILES[case])
            else:
                job = partial(measured_job, case, args, seeds, passes, workdir, recorded)
            jobs.append((case, job))
        replays: list[Path] = []
        for case in cases:
            if case in AH_FILES:
                replays.append(data_root(parser) / AH_FILES[case])
        for path in args.data:
            if not path.is_file():
                parser.error(f"--data {path}: no such file")
            case = path.name.split(".")[0]
            jobs.append((case, replay_job(case, path)))
            replays.append(path)
        metas = [autoheuristic_metadata(path) for path in replays] if trees else []
        for tree in trees:
            if not any(tree.matches(meta) for meta in metas):
                parser.error(
                    f"--pytorch-tree {tree.path}: a heuristic for {tree.describe()}; no replay "
                    "case of this run has that kernel and GPU (give its --case or --data)"
                )
        for case, job in jobs:
            started = time.perf_counter()
            try:
                rows, curves, truth, notes = job()
            except TreeFileError as error:  # a feature of a shipped tree the data lacks
                parser.error(f"--pytorch-tree: {error}")
            except TruthMachineError as error:
                parser.error(str(error))
            stem = f"bench_inputs_{'quick_' if args.quick else ''}{case}{args.tag}"
            write_results(
                case,
                rows,
                curves,
                truth,
                notes,
                stem,
                started_lines,
                time.perf_counter() - started,
                results=args.out,
            )
    return 0


def measured_job(
    case: str,
    args: argparse.Namespace,
    seeds: Sequence[int],
    passes: int,
    workdir: Path,
    argv: Sequence[str],
) -> tuple:
    from benchkit import inputs_project as project

    if case == "demo":
        problem = project.demo_problem(8 if args.quick else 64)
    elif case == "lu":
        problem = project.lu_problem(3 if args.quick else 10, args.budget)
    elif case == "gemm_cuda":
        problem = project.gemm_cuda_problem(2 if args.quick else 5, args.budget)
    else:
        problem = project.gemm_problem(2 if args.quick else 5, args.budget)
    if args.quick:  # a smoke run: small campaigns, the default sampler only
        problem.config["sampling"]["budget"] = min(problem.budget, 60)
    for assignment in args.set:  # every campaign of the project (live and truth replay)
        apply_override(problem.config, assignment)
    cells = load_or_measure_truth(
        problem,
        truth_path(case, args.quick, args.out),
        passes,
        args.remeasure_truth,
        argv,
        other_machine=args.truth_from_other_machine,
    )
    names = args.samplers or ("default" if args.quick else ",".join(["default", *EXTRA_SAMPLERS]))
    samplers: list[str | None] = [
        None if name.strip() == "default" else name.strip() for name in names.split(",")
    ]
    if args.skip_project:
        samplers = []
    return bench_measured(
        problem,
        cells,
        seeds,
        samplers,
        workdir,
        live_peers=args.live_peers and not args.quick,
        listed_inputs=args.listed_inputs,
    )


if __name__ == "__main__":
    raise SystemExit(main())
