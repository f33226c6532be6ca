"""Is the first cell of a batch measured slow? (decision 0050)

Two parts:

``campaigns``: the samples campaigns stored, each compared with its cell's truth (the median
of the truth's passes, ``bench_inputs.py``'s truth file), by position in its batch (0, 1, 2,
3 and later) and by cell duration (under / over ``--small-ms``): the median log ratio of the
objective and of each of its first three timed runs. A campaign directory is one that
``tune`` wrote (its ``samples.sqlite``); a sample at an input point the truth lacks is left
out.

    python experiments/first_in_batch.py campaigns --truth T.csv DIR [DIR ...]

``micro``: one small cell of the built-in demo timed first in a batch right after a LightGBM
fit (as a campaign fits between two batches), and again third in that batch, ``--trials``
times: the median and mean log ratio first / third. Timed in this process with one warm-up
call followed by more until each value of ``--wake`` seconds has passed (0: one call, as
before decision 0050), then by the Python executor as shipped (its measurement worker).

    python experiments/first_in_batch.py micro --trials 25 --wake 0,0.02,0.05

Both print a table; ``--out FILE`` also writes it (markdown, with the provenance).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sqlite3
import sys
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from benchkit.provenance import header, provenance
from benchkit.report import frame_markdown


def campaign_table(truth_csv: Path, directories: Sequence[Path], small_ms: float) -> pd.DataFrame:
    """Median log ratio (sample / truth median) by cell duration and position in the batch."""
    truth = pd.read_csv(truth_csv, comment="#")
    passes = [c for c in truth.columns if c.startswith("time_pass")]
    keys = [c for c in truth.columns if c not in passes and c != "time"]
    truth = truth.assign(_median=truth[passes].median(axis=1))[[*keys, "_median"]]
    rows = []
    for directory in directories:
        database = directory / "samples.sqlite"
        if not database.is_file():
            raise SystemExit(f"{directory}: no samples.sqlite (not a campaign directory)")
        with sqlite3.connect(database) as connection:
            samples = pd.read_sql("select * from samples", connection)
        samples = samples[samples["status"] == "ok"]
        samples = samples.assign(position=samples.groupby("batch").cumcount().clip(upper=3))
        matched = samples.merge(truth, on=keys)
        for _, row in matched.iterrows():
            raw = json.loads(row["raw_times"])
            ratios = {f"run {i + 1}": np.log(t / row["_median"]) for i, t in enumerate(raw[:3])}
            rows.append(
                {
                    "cells": "under" if row["_median"] * 1e3 < small_ms else "over",
                    "position": "3+" if row["position"] == 3 else str(row["position"]),
                    "objective": np.log(row["time"] / row["_median"]),
                    **ratios,
                }
            )
    if not rows:
        raise SystemExit("no sample lies at an input point of the truth")
    frame = pd.DataFrame(rows)
    table = frame.groupby(["cells", "position"]).median().round(3)
    table.insert(0, "samples", frame.groupby(["cells", "position"]).size())
    return table.reset_index()


def micro_table(trials: int, wakes: Sequence[float]) -> pd.DataFrame:
    """First in batch against third, after a LightGBM fit: for each warm-up of ``wakes``
    seconds (0: one warm-up call, as before decision 0050) timed in this process, then with
    the executor as shipped (its measurement worker)."""
    import lightgbm as lgb

    from mlkaps_gpu.cli import DEMO_CONFIG
    from mlkaps_gpu.executors import PythonExecutor

    reference = tomllib.loads(DEMO_CONFIG)["kernel"]["function"]  # the demo's routine
    module, name = reference.split(":")
    routine = getattr(importlib.import_module(module), name)
    cells = [{"n": 32, "block": 16, "order": "ikj"}, {"n": 38, "block": 32, "order": "ikj"}]
    rng = np.random.default_rng(0)
    features, target = rng.normal(size=(3000, 6)), rng.normal(size=3000)

    def measure(cell: dict, wake: float) -> float:
        """One warm-up call, more while ``wake`` seconds have not passed, then the median of
        three timed calls."""
        started = time.perf_counter()
        routine(**cell)
        while time.perf_counter() - started < wake:
            routine(**cell)
        times = []
        for _ in range(3):
            begin = time.perf_counter()
            routine(**cell)
            times.append(time.perf_counter() - begin)
        return float(np.median(times))

    def batch(wake: float | None, executor: PythonExecutor) -> np.ndarray:
        rows = [cells[0], cells[1], cells[0], cells[1]]
        if wake is None:
            return executor.run(pd.DataFrame(rows))["time"].to_numpy()
        first = measure(rows[0], wake)  # cold: first after the fit
        return np.array([first, *(measure(row, 0.0) for row in rows[1:])])

    out = []
    executor = PythonExecutor(reference, objectives=["time"], measure=True, repeats=3, warmup=1)
    try:
        for wake in [*wakes, None]:
            ratios = []
            for _ in range(trials):
                lgb.LGBMRegressor(n_estimators=300, verbose=-1).fit(features, target)
                times = batch(wake, executor)
                ratios.append(np.log(times[0] / times[2]))
            label = "the executor as shipped" if wake is None else f"warm-up {wake * 1e3:g} ms"
            out.append(
                {
                    "first cell": label,
                    "trials": trials,
                    "median log(first / third)": round(float(np.median(ratios)), 3),
                    "mean": round(float(np.mean(ratios)), 3),
                }
            )
    finally:
        executor.close()
    return pd.DataFrame(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parts = parser.add_subparsers(dest="part", required=True)
    campaigns = parts.add_parser("campaigns", help="stored samples against the truth")
    campaigns.add_argument("--truth", type=Path, required=True)
    campaigns.add_argument("directories", type=Path, nargs="+")
    campaigns.add_argument("--small-ms", type=float, default=0.2)
    micro = parts.add_parser("micro", help="one small cell, first and third in a batch")
    micro.add_argument("--trials", type=int, default=25)
    micro.add_argument("--wake", default="0,0.02,0.05", help="warm-ups (seconds), comma-separated")
    for part in (campaigns, micro):
        part.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    recorded = [sys.argv[0], *(argv if argv is not None else sys.argv[1:])]
    lines = provenance(recorded)
    if args.part == "campaigns":
        table = campaign_table(args.truth, args.directories, args.small_ms)
    else:
        table = micro_table(args.trials, [float(w) for w in args.wake.split(",")])
    text = frame_markdown(table, digits=3)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(header(lines, markdown=True) + "\n" + text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
