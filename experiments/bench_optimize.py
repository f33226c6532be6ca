"""Optimization phase at scale: batched NSGA-II vs a per-point pymoo loop vs exhaustive search.

A LightGBM surrogate (about 500 trees) of a synthetic tiled-kernel objective over 2 inputs and 6
design parameters (constraints involving the inputs), optimized on a 46 x 46 input grid by:

(a) this tool's batched NSGA-II (all grid points advanced together, one prediction per
    generation);
(b) the MLKAPS way: one pymoo ``MixedVariableGA`` per grid point with the same population and
    generations, in a Python loop (run on a random subset of points and extrapolated, since the
    full loop takes hours);
(c) exhaustive prediction of every valid configuration at every point (the true optimum of the
    surrogate).

Each method runs in its own process so that its peak memory (max RSS) is its own. The surrogate
predicts through the project's path (the compiled engine, ``--engine project``), through
LightGBM's ``predict`` only (``--engine lightgbm``), or (a) runs with both in the same run
(``--engine both``, the default) so that the two batched rows compare on the same machine state.

    python experiments/bench_optimize.py [--subset 40] [--engine both] [--out FILE.md]
        [--baseline REVISION]

``--baseline`` adds a row for (a) run by the ``mlkaps_gpu/optimize/`` package of an earlier
commit (the whole package, read with ``git``; the space and the surrogate are this checkout's).
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from benchkit.provenance import header, load_average, provenance

from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.surrogate import LightGBMSurrogate

POPULATION, GENERATIONS, GRID = 32, 40, 46
_ROOT = Path(__file__).resolve().parent.parent


def make_space() -> Space:
    tiles = (8, 16, 32, 64, 128, 256)
    return Space(
        [
            Parameter("m", "int", low=16, high=4096, log=True),
            Parameter("n", "int", low=16, high=4096, log=True),
        ],
        [
            Parameter("tile_m", "int", values=tiles),
            Parameter("tile_n", "int", values=tiles),
            Parameter("unroll", "int", values=(1, 2, 4, 8)),
            Parameter("threads", "int", values=(1, 2, 3, 4)),
            Parameter("variant", "categorical", values=("naive", "blocked", "packed")),
            Parameter("prefetch", "bool"),
        ],
        ["tile_m <= m", "tile_n <= n", "tile_m * tile_n <= 16384"],
    )


def objective(rows: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
    m, n = rows["m"].to_numpy(float), rows["n"].to_numpy(float)
    tm, tn = rows["tile_m"].to_numpy(float), rows["tile_n"].to_numpy(float)
    variant = rows["variant"].map({"naive": 0.6, "blocked": 0.0, "packed": 0.2}).to_numpy(float)
    work = m * n / 1e6
    cost = (np.log2(tm / np.sqrt(m) * 2) ** 2 + np.log2(tn / np.sqrt(n) * 2) ** 2) * 0.2
    cost += (np.log2(rows["unroll"].to_numpy(float)) - 2) ** 2 * 0.05
    cost += variant + 0.03 * rows["prefetch"].to_numpy(float) * (m > 512)
    cost += 0.1 * np.abs(rows["threads"].to_numpy(float) - np.clip(work * 2, 1, 4))
    return (1.0 + cost) * (0.05 + work) * rng.lognormal(0, 0.03, len(rows))


def build_surrogate(seed: int = 0, engine: str = "auto") -> tuple[Space, LightGBMSurrogate]:
    space = make_space()
    rng = np.random.default_rng(seed)
    rows = space.sample_valid(4000, rng)
    model = LightGBMSurrogate(
        categorical_features=space.categorical_features,
        n_estimators=500,
        log_target=True,
        engine=engine,  # type: ignore[arg-type]
    ).fit(space.features(rows), objective(rows, rng))
    return space, model


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _TimedModel:
    def __init__(self, model: LightGBMSurrogate) -> None:
        self.model, self.seconds, self.rows = model, 0.0, 0

    def predict(self, features: np.ndarray) -> np.ndarray:
        started = time.perf_counter()
        out = self.model.predict(features)
        self.seconds += time.perf_counter() - started
        self.rows += len(features)
        return out


def _engine(name: str) -> str:
    return "lightgbm" if name == "lightgbm" else "auto"


def _optimize_package_of(revision: str, folder: Path) -> Path:
    """Write the ``mlkaps_gpu/optimize/`` package of ``revision`` (every file of it: the batched
    NSGA-II was one module before 729292a, three after) under ``folder``; return its path."""
    import subprocess

    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=_ROOT, capture_output=True, check=True).stdout

    names = git("ls-tree", "-r", "-z", "--name-only", revision, "--", "mlkaps_gpu/optimize/")
    files = [name for name in names.decode().split("\0") if name]
    if "mlkaps_gpu/optimize/__init__.py" not in files:
        raise SystemExit(f"--baseline {revision}: that revision has no mlkaps_gpu/optimize/")
    for name in files:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(git("show", f"{revision}:{name}"))
    return folder / "mlkaps_gpu" / "optimize"


def _use_optimize_of(revision: str) -> None:
    """Make ``mlkaps_gpu.optimize`` the whole package of an earlier commit (this process only;
    the space and the surrogate stay this checkout's). Call before anything imports it."""
    import atexit
    import importlib.util
    import shutil
    import tempfile

    import mlkaps_gpu

    if "mlkaps_gpu.optimize" in sys.modules:
        raise RuntimeError("mlkaps_gpu.optimize is already imported: the baseline comes too late")
    folder = Path(tempfile.mkdtemp(prefix="bench_optimize_baseline_"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    package = _optimize_package_of(revision, folder)
    spec = importlib.util.spec_from_file_location(
        "mlkaps_gpu.optimize", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # its own modules (``from mlkaps_gpu.optimize._survival import ...``) are found in the
    # revision's folder, through the package's __path__
    sys.modules["mlkaps_gpu.optimize"] = module
    spec.loader.exec_module(module)
    mlkaps_gpu.optimize = module  # type: ignore[attr-defined]


def run_batched(queue: Any, engine: str, baseline: str = "") -> None:
    if baseline:
        _use_optimize_of(baseline)
    from mlkaps_gpu.optimize import GridOptimizer

    space, model = build_surrogate(engine=_engine(engine))
    grid = space.grid(GRID)
    timed = _TimedModel(model)
    started = time.perf_counter()
    optima = GridOptimizer(
        space, method="nsga2", population=POPULATION, generations=GENERATIONS, seed=1
    ).run([timed], grid)  # type: ignore[list-item]
    seconds = time.perf_counter() - started
    queue.put(
        {
            "method": f"batched ({engine}{', code of ' + baseline if baseline else ''})",
            "seconds": seconds,
            "predict_seconds": timed.seconds,
            "predictions": timed.rows,
            "values": optima["predicted_time"].to_numpy(),
            "valid": bool(space.is_valid(optima[space.names]).all()),
            "peak_mb": _peak_mb(),
        }
    )


def run_exhaustive(queue: Any, engine: str) -> None:
    from mlkaps_gpu.optimize import GridOptimizer

    space, model = build_surrogate(engine=_engine(engine))
    grid = space.grid(GRID)
    timed = _TimedModel(model)
    started = time.perf_counter()
    optima = GridOptimizer(space, method="exhaustive").run([timed], grid)  # type: ignore[list-item]
    seconds = time.perf_counter() - started
    queue.put(
        {
            "method": "exhaustive",
            "seconds": seconds,
            "predict_seconds": timed.seconds,
            "predictions": timed.rows,
            "values": optima["predicted_time"].to_numpy(),
            "valid": True,
            "peak_mb": _peak_mb(),
        }
    )


def run_per_point(queue: Any, subset: np.ndarray, engine: str) -> None:
    """pymoo MixedVariableGA per grid point (the MLKAPS loop), on a subset of points."""
    from pymoo.core.mixed import MixedVariableGA
    from pymoo.core.problem import Problem
    from pymoo.core.variable import Choice, Integer
    from pymoo.optimize import minimize

    space, model = build_surrogate(engine=_engine(engine))
    grid = space.grid(GRID).iloc[subset].reset_index(drop=True)
    timed = _TimedModel(model)

    class PointProblem(Problem):
        def __init__(self, inputs: pd.DataFrame) -> None:
            variables: dict[str, Any] = {}
            for parameter in space.design:
                if parameter.kind == "categorical":
                    variables[parameter.name] = Choice(options=list(parameter.domain_values()))
                else:
                    variables[parameter.name] = Integer(bounds=(0, parameter.n_values - 1))
            super().__init__(vars=variables, n_obj=1, n_ieq_constr=1)
            self.inputs = inputs

        def _evaluate(self, X: Any, out: dict[str, Any], *args: Any, **kwargs: Any) -> None:
            table = pd.DataFrame(list(X))
            for parameter in space.design:
                if parameter.kind != "categorical":
                    table[parameter.name] = parameter.domain_values()[
                        table[parameter.name].astype(int).to_numpy()
                    ]
            for name in space.input_names:
                table[name] = self.inputs[name].iloc[0]
            table = table[space.names]
            out["F"] = timed.predict(space.features(table))
            out["G"] = (~space.satisfies_constraints(table)).astype(float) - 0.5

    values = []
    started = time.perf_counter()
    for index in range(len(grid)):
        result = minimize(
            PointProblem(grid.iloc[[index]]),
            MixedVariableGA(pop_size=POPULATION),
            termination=("n_gen", GENERATIONS),
            seed=index,
            verbose=False,
        )
        values.append(float(np.atleast_1d(result.F)[0]) if result.F is not None else np.inf)
    seconds = time.perf_counter() - started
    queue.put(
        {
            "method": "per_point",
            "seconds": seconds,
            "predict_seconds": timed.seconds,
            "predictions": timed.rows,
            "values": np.array(values),
            "valid": True,
            "peak_mb": _peak_mb(),
        }
    )


def _in_process(target: Any, *args: Any) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(queue, *args))
    process.start()
    result = queue.get()
    process.join()
    return dict(result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subset", type=int, default=40, help="grid points for the (b) loop")
    parser.add_argument(
        "--engine",
        choices=("both", "project", "lightgbm"),
        default="both",
        help="the surrogate's prediction path; both: (a) with each, (b) and (c) with project",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    parser.add_argument(
        "--baseline",
        default="",
        metavar="REVISION",
        help="also run (a) with the mlkaps_gpu/optimize/ package of this commit (its grid "
        "optimizer and batched NSGA-II; this checkout's space and surrogate), predicting with "
        "LightGBM",
    )
    args = parser.parse_args()
    lines = provenance()
    engines = ["project", "lightgbm"] if args.engine == "both" else [args.engine]
    n_points = GRID * GRID
    subset = np.sort(np.random.default_rng(7).choice(n_points, size=args.subset, replace=False))
    exhaustive = _in_process(run_exhaustive, engines[0])
    batched = [_in_process(run_batched, engine) for engine in engines]
    if args.baseline:
        batched.append(_in_process(run_batched, "lightgbm", args.baseline))
    per_point = _in_process(run_per_point, subset, engines[0])
    lines.append(f"load average at end: {load_average()}")
    report = header(lines, markdown=True) + _report(exhaustive, batched, per_point, subset)
    print(report)
    if args.out is not None:
        args.out.write_text(report, encoding="utf-8")
    return 0


def _gaps(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    return (values - reference) / np.abs(reference)


def _report(
    exhaustive: dict[str, Any],
    batched: list[dict[str, Any]],
    per_point: dict[str, Any],
    subset: np.ndarray,
) -> str:
    truth = exhaustive["values"]
    n_points = GRID * GRID
    gap_loop = _gaps(per_point["values"], truth[subset])
    loop_full = per_point["seconds"] / len(subset) * n_points
    out = [
        f"grid {GRID}x{GRID} = {n_points} points; population {POPULATION}, generations <= "
        f"{GENERATIONS}; design space {make_space().design_product} configurations; (b) and "
        "(c) predict through the first engine of (a)\n",
        "| method | wall s (full grid) | share in predict | predicted rows | peak MB | "
        "median gap | worst gap |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in batched:
        gap = _gaps(run["values"], truth)
        out.append(
            f"| (a) {run['method']} NSGA-II | {run['seconds']:.1f} | "
            f"{run['predict_seconds'] / run['seconds']:.0%} | {run['predictions']} | "
            f"{run['peak_mb']:.0f} | {np.median(gap):.3%} | {gap.max():.2%} |"
        )
    out += [
        f"| (b) per-point MixedVariableGA ({len(subset)} points, extrapolated) | "
        f"{loop_full:.0f} | {per_point['predict_seconds'] / per_point['seconds']:.0%} | "
        f"{per_point['predictions']} (subset) | {per_point['peak_mb']:.0f} | "
        f"{np.median(gap_loop):.3%} | {gap_loop.max():.2%} |",
        f"| (c) exhaustive | {exhaustive['seconds']:.1f} | "
        f"{exhaustive['predict_seconds'] / exhaustive['seconds']:.0%} | "
        f"{exhaustive['predictions']} | {exhaustive['peak_mb']:.0f} | 0 | 0 |",
        "",
    ]
    first = batched[0]
    gap_first = _gaps(first["values"], truth)
    out.append(
        f"speed-up of (a) {first['method']} over (b): {loop_full / first['seconds']:.1f}x; on "
        f"the same {len(subset)} points: gap (a) median {np.median(gap_first[subset]):.3%}, "
        f"worst {gap_first[subset].max():.2%}; gap (b) median {np.median(gap_loop):.3%}, "
        f"worst {gap_loop.max():.2%}"
    )
    for other in batched[1:]:
        same = np.array_equal(first["values"], other["values"])
        out.append(
            f"(a) {other['method']} / {first['method']}: "
            f"{other['seconds'] / first['seconds']:.2f}x the wall time; identical optima: {same}"
        )
    out.append(
        f"(a) exact optimum at {np.mean(gap_first <= 1e-12):.1%} of points; every chosen "
        f"configuration valid: {first['valid']}"
    )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
