"""How noisy is one measurement on this machine, and how stable is the executor's objective?

Measures one configuration of the shipped ``lu`` kernel

1. as many single runs (one worker, ``--single-runs`` timed runs after one warm-up): the spread
   of a single run;
2. in ``--campaigns`` simulated campaigns: each a fresh executor (fresh worker process) that
   measures the configuration ``--per-campaign`` times with the executor's timing policy
   (default: 1 warm-up, median of 5): the spread of the objective within and between
   campaigns.

3. the same campaign structure for a **machine reference**: a single-threaded NumPy sort of a
   fixed array, sized to take about as long as the kernel, timed in this process with the same
   policy. It involves no executor, worker, compiler or OpenMP: its spread is the machine's own
   (other processes, frequency, the host under a virtual machine), the floor any executor
   policy measures on top of.

Prints a table. The target is an objective that varies by less than 3 % between campaigns.

    python experiments/timing_noise.py                  # defaults: lu 512 x 512, nb 64
    python experiments/timing_noise.py --threads 1 --env OMP_PROC_BIND=false  # unpinned
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any

import numpy as np
import pandas as pd
from benchkit.provenance import header, provenance

from mlkaps_gpu.executors import TimingPolicy, summarize
from mlkaps_gpu.kernels import available_cores, load_builtin


def spread(values: list[float]) -> dict[str, float]:
    data = np.asarray(values, dtype=float)
    mid = float(np.median(data))
    q1, q3 = np.quantile(data, [0.25, 0.75])
    return {
        "n": float(len(data)),
        "median_ms": mid * 1e3,
        "min_ms": float(data.min()) * 1e3,
        "max_ms": float(data.max()) * 1e3,
        "cv_%": float(data.std(ddof=1) / data.mean() * 100) if len(data) > 1 else 0.0,
        "rel_iqr_%": float((q3 - q1) / mid * 100),
        "range_%": float((data.max() - data.min()) / mid * 100),
    }


def reference_campaigns(
    target_s: float, policy: TimingPolicy, campaigns: int, per_campaign: int
) -> list[list[float]]:
    """Campaigns of objectives (median of ``policy.repeats`` after ``policy.warmup``) of a
    single-threaded NumPy sort sized to take about ``target_s``."""
    rng = np.random.default_rng(0)
    size = 1 << 14
    data = rng.random(size)
    while True:  # grow the array until one sort takes about the kernel's time
        start = time.perf_counter()
        np.sort(data, kind="quicksort")
        elapsed = time.perf_counter() - start
        if elapsed >= target_s / 2 or size >= 1 << 26:
            break
        size *= 2
        data = rng.random(size)
    result: list[list[float]] = []
    for _ in range(campaigns):
        values = []
        for _ in range(per_campaign):
            runs = []
            for index in range(policy.warmup + policy.repeats):
                start = time.perf_counter()
                np.sort(data, kind="quicksort")
                if index >= policy.warmup:
                    runs.append(time.perf_counter() - start)
            values.append(statistics.median(runs))
        result.append(values)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=512)
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--nb", type=int, default=64)
    parser.add_argument("--panel", default="recursive")
    parser.add_argument("--tile-m", type=int, default=32)
    parser.add_argument("--tile-n", type=int, default=64)
    parser.add_argument("--threads", type=int, default=available_cores())
    parser.add_argument("--single-runs", type=int, default=200)
    parser.add_argument("--campaigns", type=int, default=10)
    parser.add_argument("--per-campaign", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=TimingPolicy().warmup)
    parser.add_argument("--repeats", type=int, default=TimingPolicy().repeats)
    parser.add_argument(
        "--env", action="append", default=[], help="NAME=VALUE for the worker (repeatable)"
    )
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--no-reference", action="store_true", help="skip the NumPy machine reference"
    )
    args = parser.parse_args()

    env = dict(item.split("=", 1) for item in args.env)
    kernel = load_builtin("lu")
    row = {
        "m": args.m,
        "n": args.n,
        "nb": args.nb,
        "panel": args.panel,
        "tile_m": args.tile_m,
        "tile_n": args.tile_n,
        "threads": args.threads,
    }
    lines = provenance()
    print(header(lines, markdown=True))
    print(f"configuration: {row}")
    cache = tempfile.mkdtemp(prefix="timing_noise_")
    started = time.perf_counter()

    # 1. single runs
    single_policy = TimingPolicy(warmup=1, repeats=args.single_runs)
    with kernel.make_executor(cache_dir=cache, timing=single_policy, env=env) as executor:
        worker_env = getattr(executor, "worker_env", env)
        print(f"worker environment set by the executor: {worker_env}")
        result = executor.run(pd.DataFrame([row]))
    if result["status"][0] != "ok":
        raise SystemExit(f"measurement failed: {result['status'][0]}: {result['message'][0]}")
    singles = json.loads(result["raw_times"][0])
    single_summary = summarize(singles)

    # 2. campaigns
    policy = TimingPolicy(warmup=args.warmup, repeats=args.repeats)
    campaigns: list[list[float]] = []
    for _ in range(args.campaigns):
        with kernel.make_executor(cache_dir=cache, timing=policy, env=env) as executor:
            result = executor.run(pd.DataFrame([row] * args.per_campaign))
        if not (result["status"] == "ok").all():
            raise SystemExit(f"measurement failed: {list(result['message'])}")
        campaigns.append([float(t) for t in result["time"]])

    reference: list[list[float]] = []
    if not args.no_reference:
        reference = reference_campaigns(
            statistics.median(singles), policy, args.campaigns, args.per_campaign
        )

    objectives = [t for c in campaigns for t in c]
    campaign_medians = [statistics.median(c) for c in campaigns]
    campaign_first = [c[0] for c in campaigns]
    table: dict[str, dict[str, float]] = {
        f"single runs ({len(singles)})": spread(singles),
        f"objective, all ({len(objectives)})": spread(objectives),
        "objective, 1st of each campaign": spread(campaign_first),
        "campaign median of objectives": spread(campaign_medians),
    }
    if reference:
        table["reference: objective, all"] = spread([t for c in reference for t in c])
        table["reference: 1st of each campaign"] = spread([c[0] for c in reference])
        table["reference: campaign medians"] = spread([statistics.median(c) for c in reference])
    within = [spread(c)["range_%"] for c in campaigns]

    columns = ["n", "median_ms", "min_ms", "max_ms", "cv_%", "rel_iqr_%", "range_%"]
    width = max(len(k) for k in table) + 2
    print()
    print("what".ljust(width) + "".join(c.rjust(11) for c in columns))
    for name, stats in table.items():
        cells = "".join(
            (f"{stats[c]:.0f}" if c == "n" else f"{stats[c]:.3f}").rjust(11) for c in columns
        )
        print(name.ljust(width) + cells)
    print()
    print(
        f"single-run median CI95 (order statistics): [{single_summary.ci_low * 1e3:.3f}, "
        f"{single_summary.ci_high * 1e3:.3f}] ms"
    )
    print(
        f"objective range within a campaign: median {statistics.median(within):.2f} %, "
        f"max {max(within):.2f} %"
    )
    between = table["objective, 1st of each campaign"]["range_%"]
    verdict = "met" if between < 3.0 else "NOT met"
    print(
        f"between campaigns (1st objective of each): range {between:.2f} % -> 3 % target {verdict}"
    )
    if reference:
        floor = table["reference: 1st of each campaign"]
        print(
            f"machine reference (NumPy sort, same policy, no executor): between campaigns range "
            f"{floor['range_%']:.2f} %, CV {floor['cv_%']:.2f} %"
        )
    elapsed = time.perf_counter() - started
    print(f"policy: warmup={policy.warmup} repeats={policy.repeats}; {elapsed:.1f} s")

    if args.json:
        out: dict[str, Any] = {"provenance": lines, "configuration": row}
        out |= {"env": worker_env, "table": table}
        out["policy"] = {"warmup": policy.warmup, "repeats": policy.repeats}
        with open(args.json, "w") as handle:
            json.dump(out, handle, indent=2)


if __name__ == "__main__":
    main()
