"""Surrogate prediction throughput: LightGBM's ``predict``, the project's path, the optimizers.

Two models: the convolution replay campaign's (300 trees, 11 features; the campaign is tuned
into a temporary folder unless ``--campaign`` names a finished one) and the synthetic model of
``bench_optimize.py`` (500 trees, 8 features). Per model and thread count (1, 2):

- ``lightgbm``: ``Booster.predict`` through ``LightGBMSurrogate(engine="lightgbm")``;
- ``project``: ``LightGBMSurrogate.predict`` as every stage calls it (the compiled engine of
  ``mlkaps_gpu/surrogate/_compiled.py`` where it builds);

on batches of 1e3, 1e4 and 1e5 valid (input, configuration) rows in random order, repeats
interleaved (lightgbm, project, lightgbm, ...), the median rows/s reported with the spread; and

- ``optimizer_exhaustive`` / ``optimizer_nsga2``: ``GridOptimizer`` (population 40, 40
  generations) at 5 and 500 grid points (``batch_rows`` holds the points), rows/s = rows predicted
  / optimizer wall time, ``share_in_predict`` = time inside ``predict`` / wall (medians of the
  same number of runs as the repeats above). The replay grid has 5 points (the GPUs); its 500 are
  those 5 each repeated 100 times (independent runs).

``vs_lightgbm``: rows/s over LightGBM's at the same batch and threads (optimizer rows: over
LightGBM's at 1e4 rows); ``max_rel_diff``: largest relative difference to LightGBM's prediction
of the same rows (optimizer rows: of the optima the optimizer returned).

``--commands`` times the command line on the replay campaign instead (median wall of 7
interleaved runs of ``mlkaps-gpu select`` for one input and for a 5-row ``--csv`` table,
``--help`` and ``--version``, each in a new process, as a user runs them).

    python experiments/bench_predict.py --quick --csv out.csv
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from bench_optimize import build_surrogate
from benchkit.cases import CONFIGS
from benchkit.provenance import header, load_average, provenance

from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.optimize import GridOptimizer
from mlkaps_gpu.space import Space
from mlkaps_gpu.surrogate import LightGBMSurrogate, Surrogate

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = [
    "model",
    "path",
    "threads",
    "batch_rows",
    "rows_per_s",
    "vs_lightgbm",
    "max_rel_diff",
    "share_in_predict",
]
SIZES = (1_000, 10_000, 100_000)


def max_relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    scale = np.maximum(np.abs(a), np.abs(b))
    safe = np.where(scale > 0, scale, 1.0)
    return float(np.max(np.abs(a - b) / safe)) if len(a) else 0.0


class TimedSurrogate(Surrogate):
    """Counts the rows and the time inside ``predict`` of a wrapped surrogate."""

    def __init__(self, model: Surrogate) -> None:
        self.model, self.seconds, self.rows = model, 0.0, 0

    def _fit(self, features: np.ndarray, target: np.ndarray) -> None:
        raise AssertionError("not fitted here")

    def _predict(self, features: np.ndarray) -> np.ndarray:
        started = time.perf_counter()
        out = self.model.predict(features)
        self.seconds += time.perf_counter() - started
        self.rows += len(features)
        return out


def replay_model(campaign: Path | None) -> tuple[Space, Callable[..., LightGBMSurrogate], Any]:
    """The convolution replay campaign's space, model loader and 5-point grid."""
    if campaign is None:
        folder = Path(tempfile.mkdtemp(prefix="bench_predict_"))
        campaign = folder / "convolution"
        config = CONFIGS["convolution"]
        run = "import sys; from mlkaps_gpu.cli import main; sys.exit(main(sys.argv[1:]))"
        command = [sys.executable, "-c", run, "-q", "tune", str(config)]
        subprocess.run([*command, "--out", str(campaign)], check=True)
    opened = Campaign.open(campaign)
    path = str(campaign / "models" / "time.txt")

    def load(engine: str, threads: int) -> LightGBMSurrogate:
        model = LightGBMSurrogate.load(path, log_target=opened.config.surrogate.log_target)
        model.engine, model.num_threads = engine, threads  # type: ignore[assignment]
        return model

    return opened.space, load, opened.grid()


def synthetic_model() -> tuple[Space, Callable[..., LightGBMSurrogate], Any]:
    space, fitted = build_surrogate()
    text = fitted.booster_.model_to_string()

    def load(engine: str, threads: int) -> LightGBMSurrogate:
        import lightgbm as lgb

        model = LightGBMSurrogate(log_target=True, engine=engine, num_threads=threads)  # type: ignore[arg-type]
        model.booster_ = lgb.Booster(model_str=text)
        return model

    return space, load, space.grid({"m": 5, "n": 1})


def predict_rows(
    name: str, space: Space, load: Callable[..., LightGBMSurrogate], repeats: int
) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    features = space.features(space.sample_valid(max(SIZES), rng))
    rows = []
    for threads in (1, 2):
        lightgbm, project = load("lightgbm", threads), load("auto", threads)
        project.predict(features[:5000])  # builds (or loads) the compiled engine once
        for size in SIZES:
            batch = np.ascontiguousarray(features[:size])
            expected, got = lightgbm.predict(batch), project.predict(batch)
            seconds: dict[str, list[float]] = {"lightgbm": [], "project": []}
            for _ in range(repeats):  # interleaved: both see the same machine
                for path, model in (("lightgbm", lightgbm), ("project", project)):
                    started = time.perf_counter()
                    model.predict(batch)
                    seconds[path].append(time.perf_counter() - started)
            base = size / statistics.median(seconds["lightgbm"])
            for path in ("lightgbm", "project"):
                rate = size / statistics.median(seconds[path])
                spread = [size / s for s in seconds[path]]
                rows.append(
                    {
                        "model": name,
                        "path": path,
                        "threads": threads,
                        "batch_rows": size,
                        "rows_per_s": rate,
                        "vs_lightgbm": rate / base,
                        "max_rel_diff": max_relative_difference(got, expected)
                        if path == "project"
                        else 0.0,
                        "share_in_predict": float("nan"),
                        "spread": f"{min(spread):.0f}-{max(spread):.0f}",
                    }
                )
    return rows


def optimizer_rows(
    name: str,
    space: Space,
    load: Callable[..., LightGBMSurrogate],
    grids: tuple[pd.DataFrame, pd.DataFrame],
    lightgbm_rate: float,
    repeats: int,
) -> list[dict[str, Any]]:
    """Each optimizer on each grid, ``repeats`` runs: median rows/s and share, walls' spread."""
    rows = []
    for method in ("exhaustive", "nsga2"):
        for grid in grids:
            model = load("auto", 1)
            model.predict(space.features(space.sample_valid(3000, np.random.default_rng(1))))
            rates, shares, walls = [], [], []
            for _ in range(repeats):
                timed = TimedSurrogate(model)
                optimizer = GridOptimizer(space, method=method, population=40, generations=40)
                started = time.perf_counter()
                optima = optimizer.run([timed], grid)
                walls.append(time.perf_counter() - started)
                rates.append(timed.rows / walls[-1])
                shares.append(timed.seconds / walls[-1])
            reference = load("lightgbm", 1).predict(space.features(optima[space.names]))
            rows.append(
                {
                    "model": name,
                    "path": f"optimizer_{method}",
                    "threads": 1,
                    "batch_rows": len(grid),
                    "rows_per_s": statistics.median(rates),
                    "vs_lightgbm": statistics.median(rates) / lightgbm_rate,
                    "max_rel_diff": max_relative_difference(
                        optima["predicted_time"].to_numpy(), reference
                    ),
                    "share_in_predict": statistics.median(shares),
                    "spread": f"wall {min(walls):.2f}-{max(walls):.2f} s, share "
                    f"{min(shares):.0%}-{max(shares):.0%}",
                }
            )
    return rows


def run_model(
    name: str,
    model: tuple[Space, Callable[..., LightGBMSurrogate], Any],
    large: pd.DataFrame,
    repeats: int,
) -> list[dict[str, Any]]:
    space, load, small = model
    rows = predict_rows(name, space, load, repeats)
    base = next(
        r["rows_per_s"]
        for r in rows
        if r["path"] == "lightgbm" and r["threads"] == 1 and r["batch_rows"] == 10_000
    )
    return rows + optimizer_rows(name, space, load, (small, large), base, repeats)


def command_timings(campaign: Path, repeats: int = 7) -> str:
    """Median wall of the light commands, in new processes, interleaved."""
    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "inputs.csv"
        table.write_text("gpu\nA100\nA4000\nMI250X\nW6600\nW7800\n", encoding="utf-8")
        commands = {
            "select CAMPAIGN gpu=A100": ["select", str(campaign), "gpu=A100"],
            "select CAMPAIGN --csv inputs.csv (5 rows)": [
                "select",
                str(campaign),
                "--csv",
                str(table),
            ],
            "--help": ["--help"],
            "--version": ["--version"],
        }
        subprocess.run(["mlkaps-gpu", *commands["select CAMPAIGN gpu=A100"]], check=True)
        seconds: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(repeats):
            for name, arguments in commands.items():
                started = time.perf_counter()
                subprocess.run(["mlkaps-gpu", *arguments], check=True, capture_output=True)
                seconds[name].append(time.perf_counter() - started)
    lines = ["| command | median wall s | min | max |", "|---|---|---|---|"]
    for name, values in seconds.items():
        lines.append(
            f"| `mlkaps-gpu {name}` | {statistics.median(values):.3f} | {min(values):.3f} | "
            f"{max(values):.3f} |"
        )
    return "\n".join(lines) + "\n"


def markdown(table: pd.DataFrame) -> str:
    lines = [
        "| model | path | threads | batch rows (grid points) | rows/s | vs LightGBM | "
        "max rel diff | share in predict | spread |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        share = "" if np.isnan(row.share_in_predict) else f"{row.share_in_predict:.0%}"
        lines.append(
            f"| {row.model} | {row.path} | {row.threads} | {row.batch_rows} | "
            f"{row.rows_per_s:,.0f} | {row.vs_lightgbm:.2f} | {row.max_rel_diff:.1e} | "
            f"{share} | {row.spread} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument("--csv", type=Path, default=None, help="write the table as CSV here")
    parser.add_argument("--md", type=Path, default=None, help="write the table as markdown here")
    parser.add_argument("--campaign", type=Path, default=None, help="a finished replay campaign")
    parser.add_argument("--commands", action="store_true", help="time the command line instead")
    args = parser.parse_args()
    lines = provenance()
    started = time.perf_counter()
    repeats = 3 if args.quick else 7
    if args.commands:
        if args.campaign is None:
            parser.error("--commands needs --campaign (a finished replay campaign)")
        timings = command_timings(args.campaign)
        lines.append(f"load average at end: {load_average()}")
        report = header(lines, markdown=True) + timings
        print(report)
        if args.md is not None:
            args.md.write_text(report, encoding="utf-8")
        return 0
    os.environ.setdefault("MLKAPS_GPU_DATA", str(ROOT.parent / "shared" / "data" / "replay"))
    replay = replay_model(args.campaign)
    replay_large = replay[2].loc[np.tile(np.arange(len(replay[2])), 100)].reset_index(drop=True)
    synthetic = synthetic_model()
    synthetic_large = synthetic[0].grid({"m": 25, "n": 20})
    rows = run_model("convolution_replay", replay, replay_large, repeats)
    rows += run_model("synthetic", synthetic, synthetic_large, repeats)
    table = pd.DataFrame(rows)
    lines.append(f"load average at end: {load_average()}")
    lines.append(f"wall: {time.perf_counter() - started:.0f} s")
    print(header(lines, markdown=True) + markdown(table))
    if args.csv is not None:
        args.csv.write_text(header(lines) + table[COLUMNS].to_csv(index=False, float_format="%.6g"))
    if args.md is not None:
        args.md.write_text(header(lines, markdown=True) + markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
