"""The measured cases of ``bench_inputs.py``: the demo kernel, the shipped LU and GEMM (cffi),
and the shipped CUDA GEMM (CuPy, on a GPU).

A :class:`Problem` is a campaign configuration (the *problem* only: kernel, inputs, design,
constraints, objective, budget, header prefix; every method setting is the project's default)
and the input points of its truth. :func:`measure_truth` times every valid configuration at every
point with the project's own executor (``prepare(config).executor``: the one a campaign times
with); a cell's time is the minimum over the passes of the executor's median of the timed runs.
:func:`run_campaign` tunes through ``mlkaps_gpu.tune``, compiles the header and answers at every
truth point; the campaign's stored samples feed the LightGBM peer.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import math
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchkit.configs import apply_override
from benchkit.inputs_truth import Truth, truth_from_cells

#: LU: the design reduced so that the exhaustive truth stays short (tiles at the expert's,
#: one thread: nb x panel, 12 configurations where nb <= min(m, n) allows all)
LU_CONFIG = """\
[campaign]
name = "bench_inputs_lu"
seed = 0

[kernel]
executor = "cffi"
builtin = "lu"

[inputs]
m = { type = "int", range = [64, 512], log = true }
n = { type = "int", range = [64, 512], log = true }

[design]
nb = { type = "int", values = [8, 16, 32, 64, 128, 256] }
panel = { type = "categorical", values = ["unblocked", "recursive"] }
tile_m = { type = "int", values = [32] }
tile_n = { type = "int", values = [64] }
threads = { type = "int", values = [1] }
constraints = ["nb <= min(m, n)"]

[objectives]
time = "minimize"

[sampling]
budget = 200

[trees]
prefix = "lu"
"""
#: LU's expert (LAPACK: nb 64, recursive panel) at the reduced design's tiles and threads
LU_DEFAULT = {"nb": 64, "panel": "recursive", "tile_m": 32, "tile_n": 64, "threads": 1}

#: GEMM: the shipped tiled matrix product (cffi) over (m, n, k), three inputs and a design of
#: 36 configurations (tile_k at the expert's, one thread) with no constraint: a kernel none of
#: the project's method settings were chosen on, to check that what holds on the demo and LU
#: holds elsewhere.
GEMM_CONFIG = """\
[campaign]
name = "bench_inputs_gemm"
seed = 0

[kernel]
executor = "cffi"
builtin = "gemm"

[inputs]
m = { type = "int", range = [32, 256], log = true }
n = { type = "int", range = [32, 256], log = true }
k = { type = "int", range = [32, 256], log = true }

[design]
tile_m = { type = "int", values = [16, 32, 64] }
tile_n = { type = "int", values = [32, 64, 128] }
tile_k = { type = "int", values = [64] }
unroll = { type = "int", values = [1, 4] }
loop_order = { type = "categorical", values = ["ikj", "ijk"] }
threads = { type = "int", values = [1] }

[objectives]
time = "minimize"

[sampling]
budget = 300

[trees]
prefix = "gemm"
"""

#: GEMM on the GPU: the shipped CUDA kernel (``gemm_cuda``, CuPy) over (m, n, k) in [64, 1024],
#: its whole design (block_x x block_y x tile_k, 60 configurations under its constraints): the
#: project's own GPU kernel, measured where a GPU is lent (sizes kept to 1024 so that the host's
#: argument building and check keep the exhaustive truth within minutes).
GEMM_CUDA_CONFIG = """\
[campaign]
name = "bench_inputs_gemm_cuda"
seed = 0

[kernel]
executor = "cupy"
builtin = "gemm_cuda"

[inputs]
m = { type = "int", range = [64, 1024], log = true }
n = { type = "int", range = [64, 1024], log = true }
k = { type = "int", range = [64, 1024], log = true }

[design]
block_x = { type = "int", values = [8, 16, 32] }
block_y = { type = "int", values = [1, 2, 4, 8, 16, 32] }
tile_k = { type = "int", values = [8, 16, 32, 64] }
constraints = ["block_x * block_y <= 1024", "block_x * block_y >= 32"]

[objectives]
time = "minimize"

[sampling]
budget = 200

[trees]
prefix = "gemm_cuda"
"""


@dataclass
class Problem:
    """One measured case.

    Attributes:
        name: case name.
        config: the campaign configuration (TOML tables), method settings stripped.
        points: the truth's input points (input columns).
        default: the fixed default configuration (design values).
        truth_repeats: timed runs per cell of the truth (``[kernel] repeats`` of a Python
            kernel; the cffi executor's timing policy otherwise).
    """

    name: str
    config: dict[str, Any]
    points: pd.DataFrame
    default: dict[str, Any]
    truth_repeats: int = 7
    numeric_inputs: list[str] = field(default_factory=list)

    @property
    def budget(self) -> int:
        return int(self.config["sampling"]["budget"])


def listed_inputs_problem(problem: Problem) -> Problem:
    """The problem with each input declared as the values the truth's points take along it
    (``{type = "int", values = [...]}``) and a grid of every value: a campaign that samples
    and decides at the truth's points, as the budgeted peers draw their cells there.

    Raises:
        ValueError: the truth's points are not the product of their values along each input.
    """
    points = problem.points
    values = {name: sorted(int(v) for v in points[name].unique()) for name in points.columns}
    if math.prod(len(v) for v in values.values()) != len(points.drop_duplicates()):
        raise ValueError(
            f"{problem.name}: the truth's {len(points)} points are not the product of their "
            "values along each input (a grid): they cannot be listed input by input"
        )
    config = copy.deepcopy(problem.config)
    for name, listed in values.items():
        config["inputs"][name] = {"type": "int", "values": listed}
    config.setdefault("optimization", {})["grid"] = {name: len(v) for name, v in values.items()}
    return replace(problem, config=config)


def geometric_ints(low: int, high: int, count: int) -> np.ndarray:
    """``count`` distinct integers spread geometrically over ``[low, high]`` (both included)."""
    if count > high - low + 1:
        raise ValueError(f"cannot draw {count} distinct integers from [{low}, {high}]")
    wanted = count
    while True:
        values = np.unique(np.round(np.geomspace(low, high, wanted)).astype(np.int64))
        if len(values) >= count:
            # drop the surplus evenly, keeping both ends
            keep = np.unique(np.round(np.linspace(0, len(values) - 1, count)).astype(int))
            return values[keep]
        wanted += 1


def demo_problem(sizes: int) -> Problem:
    """The built-in demo (``mlkaps-gpu demo``) with the project's default method settings."""
    from benchkit.configs import strip_config
    from mlkaps_gpu.cli import DEMO_CONFIG, DEMO_DEFAULT

    config, _ = strip_config(tomllib.loads(DEMO_CONFIG))
    low, high = config["inputs"]["n"]["range"]
    points = pd.DataFrame({"n": geometric_ints(int(low), int(high), sizes)})
    return Problem("demo", config, points, dict(DEMO_DEFAULT), numeric_inputs=["n"])


def lu_problem(per_axis: int, budget: int | None = None) -> Problem:
    """The shipped LU (cffi) over (m, n), ``per_axis`` x ``per_axis`` geometric points."""
    config = _config(LU_CONFIG, budget)
    axis = geometric_ints(64, 512, per_axis)
    m, n = np.meshgrid(axis, axis, indexing="ij")
    points = pd.DataFrame({"m": m.ravel(), "n": n.ravel()})
    return Problem("lu", config, points, dict(LU_DEFAULT), numeric_inputs=["m", "n"])


def gemm_problem(per_axis: int, budget: int | None = None) -> Problem:
    """The shipped GEMM (cffi) over (m, n, k): ``per_axis`` geometric values of m and n,
    one fewer of k (5 x 5 x 4 = 100 points by default); the fixed default is the builtin's
    expert on the reduced design's one thread."""
    from mlkaps_gpu.kernels import load_builtin

    config = _config(GEMM_CONFIG, budget)
    default = {**load_builtin("gemm").expert_for({}), "threads": 1}
    axis = geometric_ints(32, 256, per_axis)
    depth = geometric_ints(32, 256, max(2, per_axis - 1))
    m, n, k = np.meshgrid(axis, axis, depth, indexing="ij")
    points = pd.DataFrame({"m": m.ravel(), "n": n.ravel(), "k": k.ravel()})
    return Problem("gemm", config, points, default, numeric_inputs=["m", "n", "k"])


def gemm_cuda_problem(per_axis: int, budget: int | None = None) -> Problem:
    """The shipped CUDA GEMM (CuPy) over (m, n, k): ``per_axis`` geometric values of m and n
    in [64, 1024], one fewer of k (5 x 5 x 4 = 100 points by default); the fixed default is
    the builtin's expert (16 x 16 blocks, tile_k 16). The truth's timed runs are the CuPy
    executor's own (2 warm-up launches, the median of 10 timed with CUDA events), as a
    campaign measures."""
    from mlkaps_gpu.kernels import load_builtin

    config = _config(GEMM_CUDA_CONFIG, budget)
    default = dict(load_builtin("gemm_cuda").expert_for({}))
    axis = geometric_ints(64, 1024, per_axis)
    depth = geometric_ints(64, 1024, max(2, per_axis - 1))
    m, n, k = np.meshgrid(axis, axis, depth, indexing="ij")
    points = pd.DataFrame({"m": m.ravel(), "n": n.ravel(), "k": k.ravel()})
    return Problem(
        "gemm_cuda", config, points, default, truth_repeats=10, numeric_inputs=["m", "n", "k"]
    )


def _config(text: str, budget: int | None) -> dict[str, Any]:
    """A measured case's configuration tables, with ``budget`` where one is given."""
    config = tomllib.loads(text)
    if budget is not None:
        config["sampling"]["budget"] = int(budget)
    return config


def config_text(config: dict[str, Any]) -> str:
    from benchkit.configs import to_toml

    return to_toml(config)


def _prepared(problem: Problem, *, for_truth: bool) -> Any:
    from mlkaps_gpu.campaign import parse_config, prepare

    data = copy.deepcopy(problem.config)
    if for_truth and data["kernel"].get("executor") == "python":
        data["kernel"]["repeats"] = problem.truth_repeats
    config = parse_config(config_text(data), label=f"{problem.name}.toml")
    setup = prepare(config)
    if for_truth and data["kernel"].get("executor") == "cffi":
        from mlkaps_gpu.executors import TimingPolicy
        from mlkaps_gpu.kernels import load_builtin

        timing = TimingPolicy(warmup=1, repeats=problem.truth_repeats)
        setup.executor = load_builtin(data["kernel"]["builtin"]).make_executor(timing=timing)
    return setup


def valid_cells(problem: Problem, space: Any) -> pd.DataFrame:
    """Every (point, configuration) the space's constraints allow."""
    design = [p.name for p in space.design]
    values = [list(p.domain_values()) for p in space.design]
    configs = pd.DataFrame(list(itertools.product(*values)), columns=design)
    table = problem.points.merge(configs, how="cross")
    return table[space.is_valid(table)].reset_index(drop=True)


def measure_truth(
    problem: Problem,
    passes: int,
    *,
    seed: int = 0,
    log: Callable[[str], None] = print,
    for_truth: bool = True,
) -> pd.DataFrame:
    """Time every valid cell ``passes`` times (each pass over all cells, in a shuffled order):
    columns ``time_pass<i>`` and ``time`` (their minimum; ``inf`` where a pass failed).
    ``for_truth``: with the truth's timed runs (7); else with the campaign's own kernel
    settings, as a campaign measures a cell."""
    setup = _prepared(problem, for_truth=for_truth)
    cells = valid_cells(problem, setup.space)
    names = list(setup.space.names)
    rng = np.random.default_rng(seed)
    chunk = 64
    try:
        for index in range(passes):
            order = rng.permutation(len(cells))
            times = np.full(len(cells), np.inf)
            started = time.perf_counter()
            for begin in range(0, len(order), chunk):
                rows = order[begin : begin + chunk]
                result = setup.executor.run(cells.iloc[rows][names].reset_index(drop=True))
                ok = (result["status"] == "ok").to_numpy()
                values = pd.to_numeric(result["time"], errors="coerce").to_numpy(dtype=float)
                times[rows] = np.where(ok & np.isfinite(values), values, np.inf)
            cells[f"time_pass{index}"] = times
            kind = "truth" if for_truth else "live"
            log(
                f"  {problem.name} {kind} pass {index + 1}/{passes}: {len(cells)} cells in "
                f"{time.perf_counter() - started:.0f} s"
            )
    finally:
        setup.executor.close()
    passes_columns = [f"time_pass{i}" for i in range(passes)]
    cells["time"] = cells[passes_columns].min(axis=1)
    return cells


def truth_of(problem: Problem, cells: pd.DataFrame, column: str = "time") -> Truth:
    """The :class:`Truth` of measured cells (``column``: ``time`` or one pass)."""
    design = [c for c in _design_names(problem) if c in cells.columns]
    inputs = list(problem.points.columns)
    return truth_from_cells(
        cells.rename(columns={column: "_t"}).drop(columns=["time"], errors="ignore"),
        name=problem.name,
        numeric_inputs=inputs,
        categorical_inputs=[],
        design=design,
        time_column="_t",
    )


#: The column of the cells the budgeted peers draw from (and the truth replay replays).
TABLE_PASS = "time_pass0"
#: The column every answer is scored on when the truth has two passes or more: the minimum
#: over the passes other than :data:`TABLE_PASS`.
SCORED = "time_scored"


def passes_of(cells: pd.DataFrame) -> list[str]:
    """The truth's pass columns (``time_pass0``, ``time_pass1``...), in order."""
    return sorted(c for c in cells.columns if c.startswith("time_pass"))


def cells_differ(table: Truth, truth: Truth) -> str:
    """Why ``table`` does not hold ``truth``'s cells (its points and configurations), or ""."""
    if table.inputs.equals(truth.inputs) and table.configs.equals(truth.configs):
        return ""
    return (
        f"its cells are not the truth's (points {table.n_points} / {truth.n_points}, "
        f"configurations {len(table.configs)} / {len(truth.configs)})"
    )


def table_and_scoring(
    problem: Problem, cells: pd.DataFrame, table_pass: str = TABLE_PASS
) -> tuple[Truth, Truth, bool]:
    """The table the budgeted peers draw their cells from and the truth every answer is
    scored on, and whether the two are independent measurements.

    With two passes or more, the table is ``table_pass`` (the first pass by default) and the
    score is the minimum over the other passes: a peer that draws a cell sees one pass's
    noise, as the campaign does, and is not scored on the very values it chose by (a peer
    that tunes a point fully on the scoring values scores 1.0 there by construction). With
    one pass, both are that pass."""
    passes = passes_of(cells)
    if len(passes) < 2 or table_pass not in passes:
        truth = truth_of(problem, cells)
        return truth, truth, False
    scored = cells.assign(**{SCORED: cells[[p for p in passes if p != table_pass]].min(axis=1)})
    table, truth = truth_of(problem, cells, table_pass), truth_of(problem, scored, SCORED)
    if cells_differ(table, truth):
        raise ValueError(
            f"{problem.name}: {table_pass} ran at {table.n_points} points, the other passes at "
            f"{truth.n_points}: a point where no configuration ran in one pass cannot be "
            "scored (measure the truth again)"
        )
    return table, truth, True


def _design_names(problem: Problem) -> list[str]:
    return [k for k in problem.config["design"] if k != "constraints"]


def noise_floor(problem: Problem, cells: pd.DataFrame) -> list[dict[str, float]]:
    """The optimum of each pass scored on each other pass (geomean, worst point...)."""
    passes = passes_of(cells)
    out = []
    for first, second in itertools.permutations(passes, 2):
        chooser, judge = truth_of(problem, cells, first), truth_of(problem, cells, second)
        out.append({"chosen on": first, "scored on": second, **optimum_on(chooser, judge)})
    return out


def optimum_answers(chooser: Truth, judge: Truth) -> np.ndarray:
    """``chooser``'s optimum at every point, as ``judge`` indexes configurations."""
    return judge.config_index(chooser.configs.iloc[chooser.best_config()])


def optimum_on(chooser: Truth, judge: Truth) -> dict[str, float]:
    """The summary (geomean, worst point...) of ``chooser``'s optimum at every point, scored
    on ``judge``."""
    from benchkit.inputs_truth import point_fractions, summarize_fractions

    return summarize_fractions(point_fractions(judge, optimum_answers(chooser, judge)))


@dataclass
class CampaignResult:
    """What one campaign gives the benchmark."""

    answers: np.ndarray
    samples: pd.DataFrame
    sample_times: np.ndarray
    tune_seconds: float
    directory: Path


def campaign_config(problem: Problem, seed: int, method: str | None) -> dict[str, Any]:
    data = copy.deepcopy(problem.config)
    data.setdefault("campaign", {})["seed"] = int(seed)
    if method is not None:
        data.setdefault("sampling", {})["method"] = method
    return data


def truth_replay_config(problem: Problem, table: Path, seed: int) -> dict[str, Any]:
    """The problem's campaign on a table replay of its truth (the budgeted peers' data): the
    same budget, seed, constraints and method settings; inputs, configurations and grid from
    the table."""
    data = copy.deepcopy(problem.config)
    data.setdefault("campaign", {})["seed"] = int(seed)
    data["kernel"] = {
        "executor": "replay",
        "format": "csv",
        "objective": "time",
        "files": str(table),
        "input_columns": list(problem.points.columns),
        "design_columns": _design_names(problem),
    }
    data.pop("inputs", None)
    constraints = data.get("design", {}).get("constraints")
    data["design"] = {"constraints": constraints} if constraints else {}
    if not data["design"]:
        data.pop("design")
    data.get("optimization", {}).pop("grid", None)
    return data


def run_truth_replay(
    problem: Problem,
    cells: pd.DataFrame,
    truth: Truth,
    seed: int,
    workdir: Path,
    column: str = "time",
    settings: Sequence[str] = (),
    name: str = "truth",
) -> CampaignResult:
    """A campaign (the project's defaults, with ``settings``: ``section.key=value``
    assignments) on a replay of the truth table (its ``column``): the peers' data, its noise
    and its input points; its compiled header's answer at every point of ``truth``.
    ``name`` names the replayed table's files in ``workdir`` (one per table)."""
    table = pass_table(problem, cells, column, workdir, name)
    directory = workdir / problem.name / f"{name}_replay_s{seed}"
    path = directory.with_suffix(".toml")
    data = truth_replay_config(problem, table, seed)
    for assignment in settings:
        apply_override(data, assignment)
    path.write_text(config_text(data))
    return _tuned(path, directory, truth)


def pass_noise(cells: pd.DataFrame) -> np.ndarray:
    """A measurement's noise in the log time, as the truth's passes measured it: the log
    ratio of every pair of passes at every cell where both ran, over the square root of 2
    (each pass carries one measurement's noise)."""
    passes = passes_of(cells)
    if len(passes) < 2:
        raise ValueError("the noise of a measurement needs a truth of two passes or more")
    ratios = []
    for first, second in itertools.combinations(passes, 2):
        ratio = np.log(cells[first].to_numpy(float) / cells[second].to_numpy(float))
        ratios.append(ratio[np.isfinite(ratio)])
    return np.concatenate(ratios) / math.sqrt(2.0)


def pass_table(
    problem: Problem, cells: pd.DataFrame, column: str, workdir: Path, name: str
) -> Path:
    """The cells' ``column`` (a pass, or ``time``) as a table (inputs, design, ``time``):
    ``workdir/<problem>/<name>_table.csv``. A failed cell stays ``inf``, a failure."""
    path = workdir / problem.name / f"{name}_table.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = [*problem.points.columns, *_design_names(problem)]
    cells[[*columns, column]].rename(columns={column: "time"}).to_csv(path, index=False)
    return path


def run_emulated(
    problem: Problem,
    table: Path,
    noise: np.ndarray,
    truth: Truth,
    seed: int,
    workdir: Path,
    settings: Sequence[str] = (),
    drift: tuple[float, float] = (0.0, 0.0),
) -> CampaignResult:
    """The problem's campaign (its inputs' whole range, its grid; the project's defaults with
    ``settings``) on a kernel emulated from ``table`` (``benchkit/emulated_kernel.py``: the
    table's times interpolated between its points, with ``noise`` drawn afresh at each
    measurement, and ``drift = (sd, rho)``: slow moments lasting over successive
    measurements); its compiled header's answer at every point of ``truth``."""
    import json
    import shutil

    directory = workdir / problem.name / f"{table.stem}_emulated_s{seed}"
    directory.mkdir(parents=True, exist_ok=True)
    kernel = directory / "emulated_kernel.py"
    shutil.copy(Path(__file__).with_name("emulated_kernel.py"), kernel)
    np.save(directory / "noise.npy", np.asarray(noise, dtype=np.float64))
    spec = {
        "table": str(table.resolve()),
        "inputs": list(problem.points.columns),
        "design": _design_names(problem),
        "noise": str((directory / "noise.npy").resolve()),
        "seed": int(seed),
        "drift": [float(drift[0]), float(drift[1])],
    }
    kernel.with_suffix(".json").write_text(json.dumps(spec))
    data = campaign_config(problem, seed, None)
    data["kernel"] = {"executor": "python", "function": f"{kernel.name}:time"}
    for assignment in settings:
        apply_override(data, assignment)
    path = directory / "campaign.toml"
    path.write_text(config_text(data))
    return _tuned(path, directory / "campaign", truth)


def run_campaign(
    problem: Problem, truth: Truth, seed: int, method: str | None, workdir: Path
) -> CampaignResult:
    """Tune (``mlkaps_gpu.tune``), compile the header, answer at every truth point."""
    text = config_text(campaign_config(problem, seed, method))
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    directory = workdir / problem.name / f"{method or 'default'}_s{seed}_{digest}"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory.with_suffix(".toml")
    path.write_text(text)
    return _tuned(path, directory, truth)


def _tuned(path: Path, directory: Path, truth: Truth) -> CampaignResult:
    """Tune the configuration file ``path`` into ``directory``, compile its header and answer
    at every truth point."""
    import mlkaps_gpu
    from mlkaps_gpu.codegen import CompiledHeader

    started = time.perf_counter()
    campaign = mlkaps_gpu.tune(path, out=directory)
    seconds = time.perf_counter() - started
    compiled = CompiledHeader(
        campaign.load_selector(),
        campaign.header_path.read_text(),
        prefix=campaign.config.trees.prefix,
        build_dir=directory / "build",
    )
    answers = truth.config_index(compiled(truth.inputs.copy()))
    samples = campaign.store.load()
    objective = next(iter(campaign.config.objectives))
    values = pd.to_numeric(samples[objective], errors="coerce").to_numpy(dtype=float)
    ok = (samples["status"] == "ok").to_numpy() & np.isfinite(values)
    return CampaignResult(
        answers=answers,
        samples=samples,
        sample_times=np.where(ok, values, math.inf),
        tune_seconds=seconds,
        directory=directory,
    )
