"""The machine's load recorded with each batch (issue 39, Build 5): other processes' CPU use,
never the tuner's own (its workers included); ``tune`` says when a share of the measurements
was taken on a busy machine, and which answers rest on them."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import SampleStore
from mlkaps_gpu.campaign._load import (
    DISTURBED_CORES,
    MIN_SECONDS,
    BatchLoad,
    LoadProbe,
    disturbed_batches,
    interference,
)
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.validation import build_report

needs_proc = pytest.mark.skipif(not LoadProbe.available(), reason="needs Linux /proc")

#: A kernel that really computes: 10 ms of CPU at least, then NumPy work, more or less by
#: block size (the floor keeps the measuring past MIN_SECONDS however fast the machine: 54
#: measurements of 4 calls, 2 s at least).
KERNEL = """
import time

import numpy as np

_A = np.random.default_rng(0).random((128, 128))

def work(n, block):
    start = time.process_time()
    while time.process_time() - start < 0.01:
        pass
    x = _A[:n, :n]
    for _ in range(max(1, n // block)):
        x = np.tanh(x @ _A[:n, :n])
    return float(x[0, 0])
"""

CONFIG = """
[campaign]
name = "load"
seed = 0

[kernel]
executor = "python"
function = "busy_kernel.py:work"
measure = true
warmup = 1
repeats = 3

[inputs]
n = { type = "int", range = [40, 128] }

[design]
block = { type = "int", values = [4, 8, 16, 32] }

[objectives]
time = "minimize"

[sampling]
budget = 60
batch_size = 20

[optimization]
grid = 6

[trees]
verify_inputs = 500
"""


def _tune(folder: Path, hogs: int) -> tuple[dict, str]:
    """``mlkaps-gpu --json tune`` in a process of its own, with ``hogs`` CPU-bound processes
    (not its descendants) running beside it for its whole length; its load record and stderr."""
    (folder / "busy_kernel.py").write_text(textwrap.dedent(KERNEL))
    (folder / "load.toml").write_text(CONFIG)
    command = [
        sys.executable,
        "-c",
        "import sys; from mlkaps_gpu.cli import main; sys.exit(main())",
        "--json",
        "tune",
        str(folder / "load.toml"),
        "--out",
        str(folder / "run"),
    ]
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    (record,) = [r["interference"] for r in records if "interference" in r]
    return record, done.stderr


@pytest.mark.integration
@needs_proc
def test_tune_says_the_measurements_were_disturbed_by_two_cpu_bound_processes(
    tmp_path: Path,
) -> None:
    record, stderr = _tune(tmp_path, hogs=2)
    assert record["sustained"] and record["share"] > 0.5
    assert record["median_other_cores"] >= DISTURBED_CORES
    assert "the machine was busy" in stderr
    assert f"{record['disturbed']} of {record['measurements']} measurements" in stderr
    if record["answers_on_disturbed"]:
        assert "grid points' answers rest only on measurements of a busy machine" in stderr
    html, _ = build_report(tmp_path / "run")
    assert "were taken while other processes kept the machine" in html


@pytest.mark.integration
@needs_proc
def test_tune_says_nothing_on_a_quiet_machine(tmp_path: Path) -> None:
    """Fails where other programs keep the machine busy meanwhile (a shared machine): that
    is what it detects."""
    record, stderr = _tune(tmp_path, hogs=0)
    with sqlite3.connect(tmp_path / "run" / "samples.sqlite") as connection:
        (stored,) = connection.execute("SELECT COUNT(*) FROM samples").fetchone()
    assert record["measurements"] == stored  # the load was recorded with every batch
    assert not record["sustained"], record
    assert "busy" not in stderr


@needs_proc
def test_the_probe_counts_the_tuners_own_processes_as_its_own() -> None:
    """CPU used by a descendant (alive at the end, or reaped during the batch) is never load."""
    spin = "import time\nwhile time.process_time() < 0.4: pass\n"
    probe = LoadProbe().start()
    subprocess.run([sys.executable, "-c", spin], check=True)  # reaped
    alive = subprocess.Popen(
        [sys.executable, "-c", spin + "print('done', flush=True)\nimport sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert alive.stdout is not None and alive.stdout.readline() == "done\n"
        load = probe.stop()
    finally:
        alive.kill()
        alive.wait()
    assert load is not None and load.cpus >= 1
    assert load.own_cores * load.seconds >= 0.75  # both children's 0.4 s, less tick rounding
    assert (load.own_cores + load.other_cores) <= load.cpus + 0.1


def _loads(batches: list[tuple[float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "batch": np.arange(len(batches)),
            "seconds": [s for s, _ in batches],
            "other_cores": [o for _, o in batches],
            "own_cores": 1.0,
            "cpus": 2,
        }
    )


def test_short_batches_are_judged_pooled_with_their_neighbours() -> None:
    # one 0.05 s batch reading 2 cores (two ticks of rounding) among quiet ones: not disturbed
    quiet = _loads([(0.4, 0.0), (0.05, 2.0), (0.6, 0.0), (1.2, 0.1)])
    assert len(disturbed_batches(quiet)) == 0
    busy = _loads([(0.3, 1.4), (0.3, 1.2), (0.5, 1.3), (1.5, 0.0), (0.2, 0.0)])
    assert disturbed_batches(busy).tolist() == [0, 1, 2]
    assert MIN_SECONDS <= 1.1  # the stretches above hold one second
    # under MIN_SECONDS of measuring in all: too coarse to say anything
    assert len(disturbed_batches(_loads([(0.2, 1.9), (0.3, 1.9)]))) == 0


def test_others_using_cores_the_tuner_left_idle_do_not_disturb() -> None:
    """Two busy cores of a 16-core machine beside a one-threaded kernel took nothing from it;
    the same beside a kernel using the other 14 did."""
    loads = _loads([(2.0, 2.0), (2.0, 2.0)])
    loads["cpus"] = 16
    assert len(disturbed_batches(loads)) == 0
    loads["own_cores"] = 14.0
    assert disturbed_batches(loads).tolist() == [0, 1]


def test_interference_names_the_answers_measured_only_in_disturbed_batches() -> None:
    samples = pd.DataFrame(
        {
            "n": [100, 100, 200, 200, 300],
            "block": [8, 16, 8, 16, 8],
            "status": ["ok"] * 5,
            "batch": [0, 0, 1, 2, 2],
        }
    )
    loads = _loads([(2.0, 0.0), (2.0, 1.5), (2.0, 0.0)])
    answers = pd.DataFrame({"n": [100, 200, 300, 400], "block": [8, 8, 8, 8]})
    record = interference(samples, loads, answers, ["n"])
    assert record is not None
    assert record["disturbed"] == 1 and record["measurements"] == 5
    assert record["sustained"]  # 20 % of the measurements
    assert record["answers_on_disturbed"] == 1 and record["points"] == [{"n": 200}]
    assert interference(samples, loads.iloc[:0], answers, ["n"]) is None  # nothing recorded


def test_the_store_keeps_one_load_per_batch_and_reads_old_stores(tmp_path: Path) -> None:
    space = Space(
        [Parameter("n", "int", values=tuple(range(1, 11)))],
        [Parameter("b", "int", values=(1, 2))],
    )
    path = tmp_path / "samples.sqlite"
    store = SampleStore(path, space, ["time"])
    rows = pd.DataFrame({"n": [1, 2], "b": [1, 2]})
    results = pd.DataFrame(
        {
            "time": [1.0, 2.0],
            "status": ["ok", "ok"],
            "n_repeats": [1, 1],
            "raw_times": ["[]", "[]"],
            "message": ["", ""],
        }
    )
    store.append(rows, results)  # an old store, or a replay: no load, no table
    assert len(store.batch_loads()) == 0
    with sqlite3.connect(path) as connection:
        tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
    assert "batch_load" not in tables
    store.append(rows, results, BatchLoad(seconds=1.5, other_cores=1.2, own_cores=0.9, cpus=2))
    loads = store.batch_loads()
    assert loads.to_dict("records") == [
        {"batch": 1, "seconds": 1.5, "other_cores": 1.2, "own_cores": 0.9, "cpus": 2}
    ]
    record = interference(store.load(), loads)
    assert record is not None and record["measurements"] == 2  # batch 0 has no record
    assert LoadProbe().stop() is None  # never started
