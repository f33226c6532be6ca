"""How the tool's own cost grows with the sampling budget.

Runs the sampling stage of campaigns of 10,000, 50,000 and 100,000 samples on a cheap analytic
Python kernel (``PythonExecutor`` in model mode, sequential backend) and reports, per 1,000
samples, the time spent in the store (``SampleStore.append`` / ``load``), in the sampler
(``ask`` + ``tell``, refits excluded), in surrogate refits (GA-Adaptive only), in the kernel
(the executor) and elsewhere, and the peak resident memory of the process. ``tool`` is the wall
time less the kernel's; ``cpu`` is the same in process CPU time, which other load on the machine
disturbs less. Each size runs in its own subprocess so that ``ru_maxrss`` is that campaign's peak.

The big sizes use LHS (a sampler that does not refit); GA-Adaptive, which refits a LightGBM
surrogate before every batch, runs at 10,000 only (``--ga-sizes`` to change).

Usage::

    python experiments/bench_scale.py                 # the table
    python experiments/bench_scale.py --sizes 10000 --methods lhs --profile 25
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import pstats
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchkit import provenance

KERNEL = '''
import math

def model(row):
    """An analytic 'kernel': cost of a blocked loop nest, no timing involved."""
    n, m, block, unroll = row["n"], row["m"], row["block"], row["unroll"]
    penalty = {"a": 0.0, "b": 0.2, "c": 0.5}[row["variant"]]
    return (math.log(block / math.sqrt(n)) ** 2 + abs(math.log2(unroll) - math.log10(m))
            + penalty + n * m * 1e-9)
'''

CONFIG = """\
[campaign]
name = "bench"
seed = 1

[kernel]
executor = "python"
function = "bench_kernel.py:model"

[inputs]
n = {{ type = "int", range = [16, 65536], log = true }}
m = {{ type = "int", range = [1, 4096], log = true }}

[design]
block = {{ type = "int", values = [4, 8, 16, 32, 64, 128, 256] }}
unroll = {{ type = "int", range = [1, 16] }}
variant = {{ type = "categorical", values = ["a", "b", "c"] }}
constraints = ["block <= n"]

[sampling]
method = "{method}"
budget = {budget}
batch_size = {batch}

[surrogate]
n_estimators = {trees}
"""

PARTS = ("store", "sampler", "refit", "kernel", "other")


# ------------------------------------------------------------------------------- child
def _instrument(wall: dict[str, float], cpu: dict[str, float]) -> None:
    """Wrap the methods whose time is reported (wall and process CPU time); a timed call
    inside another (a refit inside ``ask``) is charged to the inner part only."""
    from mlkaps_gpu.campaign import SampleStore
    from mlkaps_gpu.executors import PythonExecutor
    from mlkaps_gpu.sampling import GAAdaptiveSampler, Sampler

    active: list[str] = []

    def timed(part: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            outer = active[-1] if active else None
            active.append(part)
            started, started_cpu = time.perf_counter(), time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                elapsed_cpu = time.process_time() - started_cpu
                active.pop()
                wall[part] += elapsed
                cpu[part] += elapsed_cpu
                if outer is not None:
                    wall[outer] -= elapsed
                    cpu[outer] -= elapsed_cpu

        return wrapper

    SampleStore.append = timed("store", SampleStore.append)  # type: ignore[method-assign]
    SampleStore.load = timed("store", SampleStore.load)  # type: ignore[method-assign]
    Sampler.ask = timed("sampler", Sampler.ask)  # type: ignore[method-assign]
    Sampler.tell = timed("sampler", Sampler.tell)  # type: ignore[method-assign]
    GAAdaptiveSampler._model = timed("refit", GAAdaptiveSampler._model)  # type: ignore[method-assign]
    PythonExecutor.run = timed("kernel", PythonExecutor.run)  # type: ignore[method-assign]


def child(method: str, size: int, batch: int, trees: int, profile: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as folder:
        root = Path(folder)
        (root / "bench_kernel.py").write_text(textwrap.dedent(KERNEL))
        from mlkaps_gpu.campaign import Campaign, parse_config

        config = parse_config(
            CONFIG.format(method=method, budget=size, batch=batch, trees=trees),
            path=root / "bench.toml",
        )
        totals: dict[str, float] = defaultdict(float)
        cpu: dict[str, float] = defaultdict(float)
        _instrument(totals, cpu)
        campaign = Campaign.create_or_resume(config, root / "campaign")
        baseline_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        profiler = cProfile.Profile() if profile else None
        started, started_cpu = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        campaign.sample()
        if profiler:
            profiler.disable()
        wall = time.perf_counter() - started
        wall_cpu = time.process_time() - started_cpu
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        stored = len(campaign.store)
        database_mb = (
            sum(path.stat().st_size for path in (root / "campaign").glob("samples.sqlite*")) / 2**20
        )
    if profiler:
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(profile)
        stats.sort_stats("cumulative").print_stats(profile)
    totals["other"] = wall - sum(totals[p] for p in PARTS if p != "other")
    return {
        "method": method,
        "size": size,
        "stored": stored,
        "wall": wall,
        "cpu": wall_cpu,
        "kernel_cpu": cpu["kernel"],
        **{f"{part}_cpu": cpu[part] for part in PARTS if part != "other"},
        **{part: totals[part] for part in PARTS},
        "baseline_mb": baseline_kb / 1024,
        "peak_mb": peak_kb / 1024,
        "database_mb": database_mb,
    }


# ------------------------------------------------------------------------------ parent
def run_size(method: str, size: int, batch: int, trees: int, profile: int) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--child",
        "--methods",
        method,
        "--sizes",
        str(size),
        "--batch",
        str(batch),
        "--trees",
        str(trees),
        "--profile",
        str(profile),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if profile:
        print(done.stderr, file=sys.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"{method} {size}: the benchmark failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def table(rows: list[dict[str, Any]]) -> str:
    header = (
        f"{'sampler':<12}{'samples':>9}{'wall s':>9} | per 1,000 samples (s): "
        f"{'store':>7}{'sampler':>9}{'refit':>8}{'kernel':>8}{'other':>7}{'tool':>7}"
        f"{'cpu':>7} | {'peak MB':>8}{'db MB':>7}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        per = 1000.0 / row["size"]
        tool = row["wall"] - row["kernel"]
        lines.append(
            f"{row['method']:<12}{row['size']:>9,}{row['wall']:>9.1f} | {'':>23}"
            f"{row['store'] * per:>7.3f}{row['sampler'] * per:>9.3f}{row['refit'] * per:>8.3f}"
            f"{row['kernel'] * per:>8.3f}{row['other'] * per:>7.3f}{tool * per:>7.3f}"
            f"{(row['cpu'] - row['kernel_cpu']) * per:>7.3f}"
            f" | {row['peak_mb']:>8.0f}{row['database_mb']:>7.1f}"
        )
    return "\n".join(lines)


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    """Whether the targets hold: per-1,000 time grows at most linearly, peak < 2 GB."""
    out = []
    for method in sorted({r["method"] for r in rows}):
        runs = sorted((r for r in rows if r["method"] == method), key=lambda r: r["size"])
        if len(runs) < 2:
            continue
        small, large = runs[0], runs[-1]
        ratio = large["size"] / small["size"]
        growth = {}
        for clock, kernel in (("wall", "kernel"), ("cpu", "kernel_cpu")):
            per_small = (small[clock] - small[kernel]) / small["size"]
            per_large = (large[clock] - large[kernel]) / large["size"]
            growth[clock] = per_large / per_small
        out.append(
            f"{method}: tool time per 1,000 samples x{growth['wall']:.2f} wall, "
            f"x{growth['cpu']:.2f} cpu from {small['size']:,} to {large['size']:,} samples "
            f"(x{ratio:.0f} samples): "
            + ("at most linear: met" if max(growth.values()) <= ratio else "NOT met")
        )
    largest = max(rows, key=lambda r: (r["size"], r["peak_mb"]))
    out.append(
        f"peak memory at {largest['size']:,} samples: {largest['peak_mb']:.0f} MB: "
        + ("under 2 GB: met" if largest["peak_mb"] < 2048 else "NOT met")
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument("--methods", nargs="+", default=["lhs"])
    parser.add_argument("--ga-sizes", type=int, nargs="*", default=[10_000])
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--trees", type=int, default=300, help="surrogate n_estimators")
    parser.add_argument("--profile", type=int, default=0, help="print the top N functions")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = child(args.methods[0], args.sizes[0], args.batch, args.trees, args.profile)
        print(json.dumps(result))
        return 0
    lines = provenance.provenance()  # the commit and load when the run starts
    plan = [(m, s) for m in args.methods for s in args.sizes]
    plan += [("ga_adaptive", s) for s in args.ga_sizes]
    rows = []
    for method, size in plan:
        print(f"running {method} {size:,} ...", file=sys.stderr, flush=True)
        rows.append(run_size(method, size, args.batch, args.trees, args.profile))
    print(provenance.header(lines, markdown=True) + table(rows))
    for line in verdict(rows):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
