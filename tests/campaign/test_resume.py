"""Kill a campaign (SIGKILL) inside every stage; the resumed run ends identical to an
uninterrupted one with the same seed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.testing import write_config


def _command(config: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mlkaps_gpu.cli._main",
        "--quiet",
        "tune",
        str(config),
        "--out",
        str(out),
    ]


def _stages(out: Path) -> list[str]:
    try:
        return list(json.loads((out / "campaign.json").read_text())["stages"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return []


def _content(out: Path) -> tuple[pd.DataFrame, str, str]:
    store = Campaign.open(out).store.load().drop(columns=["timestamp"])
    return store, (out / "optima.csv").read_text(), (out / "toy.h").read_text()


@pytest.fixture
def slow_config(kernel_path: Path) -> Path:
    path = write_config(kernel_path, budget=60, batch=10)
    text = path.read_text().replace(
        "[optimization]\n", '[optimization]\nmethod = "nsga2"\npopulation = 24\ngenerations = 12\n'
    )
    path.write_text(text)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["modeling", "optimization", "trees"])
def test_kill_inside_stage_then_resume(stage: str, slow_config: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    subprocess.run(_command(slow_config, reference), check=True, timeout=600)
    out = tmp_path / "killed"
    previous = {"modeling": "sampling", "optimization": "modeling", "trees": "optimization"}[stage]
    process = subprocess.Popen(_command(slow_config, out), env=dict(os.environ))
    deadline = time.time() + 300
    while previous not in _stages(out) and time.time() < deadline and process.poll() is None:
        time.sleep(0.002)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    stages = _stages(out)
    assert previous in stages and stage not in stages, stages  # killed inside the stage
    subprocess.run(_command(slow_config, out), check=True, timeout=600)
    store, optima, header = _content(out)
    ref_store, ref_optima, ref_header = _content(reference)
    assert store.equals(ref_store)
    assert optima == ref_optima
    assert header == ref_header
