"""End to end: tune, resume after SIGKILL, select through the compiled header."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mlkaps_gpu.campaign import Campaign, load_config
from mlkaps_gpu.cli._main import main
from mlkaps_gpu.testing import write_config
from tests.toy import ToyCampaigns


def _stored(directory: Path) -> int:
    database = directory / "samples.sqlite"
    if not database.exists():
        return 0
    try:
        with sqlite3.connect(database, timeout=5) as connection:
            return int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


@pytest.mark.compiler
def test_tune_then_select_answers_like_the_trees(
    toy_campaign: ToyCampaigns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the session's toy campaign of budget 120, tuned by ``mlkaps-gpu tune`` (main, in-process)
    out = toy_campaign.copy(tmp_path / "campaign", budget=120)
    for name in ("samples.sqlite", "optima.csv", "selector.json", "toy.h", "verification.json"):
        assert (out / name).exists(), name
    campaign = Campaign.open(out)
    assert len(campaign.store) == 120
    verification = json.loads((out / "verification.json").read_text())
    assert verification["mismatches"] == 0 and verification["verified_inputs"] >= 2000
    selector = campaign.load_selector()
    capsys.readouterr()
    for n in (16, 100, 3000):
        assert main(["select", str(out), f"n={n}"]) == 0
        answer = json.loads(capsys.readouterr().out.strip())
        import pandas as pd

        expected = selector.select(pd.DataFrame({"n": [n]})).iloc[0]
        assert answer == {"block": int(expected["block"]), "variant": expected["variant"]}
    # the analytic optimum: block near sqrt(n), variant "fast"
    optima = campaign.load_optima()
    assert (optima["variant"] == "fast").mean() > 0.9
    assert campaign.space.is_valid(optima[campaign.space.names]).all()


def test_select_reports_bad_inputs(
    toy_campaign: ToyCampaigns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = toy_campaign.copy(tmp_path / "campaign", budget=60)
    assert main(["select", str(out), "m=3"]) == 2
    assert "unknown input" in capsys.readouterr().err
    assert main(["select", str(out)]) == 2
    assert "missing input" in capsys.readouterr().err
    assert main(["select", str(out), "n=abc"]) == 2
    assert "expected a int value" in capsys.readouterr().err


def test_changed_config_is_refused_on_resume(
    toy_campaign: ToyCampaigns,
    kernel_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = toy_campaign.copy(tmp_path / "campaign", budget=60)  # tuned with budget = 60
    changed = write_config(kernel_path, budget=80, name="changed.toml")
    capsys.readouterr()
    assert main(["--quiet", "tune", str(changed), "--out", str(out)]) == 2
    assert "differs" in capsys.readouterr().err
    assert main(["--quiet", "tune", str(changed), "--out", str(out), "--force"]) == 0
    assert len(Campaign.open(out).store) == 80


def test_same_seed_same_campaign(
    toy_campaign: ToyCampaigns, kernel_path: Path, tmp_path: Path
) -> None:
    first = toy_campaign.tuned(budget=60)  # the session's, tuned from the same configuration
    config = write_config(kernel_path, budget=60)
    tables = []
    for out in (first, tmp_path / "b"):
        if not out.exists():
            assert main(["--quiet", "tune", str(config), "--out", str(out)]) == 0
        campaign = Campaign.open(out)
        table = campaign.store.load().drop(columns=["timestamp"])
        tables.append(table)
        assert (out / "toy.h").read_text().split("*/", 1)[1] == (
            (first / "toy.h").read_text().split("*/", 1)[1]
        )
    assert tables[0].equals(tables[1])


@pytest.mark.integration
def test_sigkill_during_sampling_loses_and_duplicates_nothing(
    kernel_path: Path, tmp_path: Path
) -> None:
    budget, batch = 100, 10
    config = write_config(kernel_path, function="slow_model", budget=budget, batch=batch)
    out = tmp_path / "campaign"
    command = [
        sys.executable,
        "-m",
        "mlkaps_gpu.cli._main",
        "--quiet",
        "tune",
        str(config),
        "--out",
        str(out),
    ]
    env = dict(os.environ)
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while _stored(out) < 5 * batch and time.time() < deadline:
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    before = _stored(out)
    assert 0 < before < budget, before
    campaign = Campaign.open(out)
    first = campaign.store.load().drop(columns=["timestamp"])
    assert before % batch == 0  # whole batches only: a batch is one transaction
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    final = Campaign.open(out).store.load().drop(columns=["timestamp"])
    assert len(final) == budget
    # nothing lost: the rows measured before the kill are still there, unchanged
    assert final.iloc[: len(first)].reset_index(drop=True).equals(first)
    # nothing duplicated
    keys = list(zip(*[final[c] for c in campaign.space.names], strict=True))
    assert len(set(keys)) == len(keys)
    assert (Path(out) / "toy.h").exists()
    # and the same content as an uninterrupted campaign with the same seed
    reference = tmp_path / "reference"
    subprocess.run([*command[:-1], str(reference)], env=env, check=True, timeout=300)
    expected = Campaign.open(reference).store.load().drop(columns=["timestamp"])
    assert final.equals(expected)
    assert (reference / "toy.h").read_text() == (out / "toy.h").read_text()


def test_config_loader_reads_file(kernel_path: Path) -> None:
    config = load_config(write_config(kernel_path))
    assert config.sampling.budget == 120
    assert config.trees.prefix == "toy"
    assert np.isclose(len(config.digest), 64)


def test_fixed_inputs_and_transfer(kernel_path: Path, tmp_path: Path) -> None:
    """A campaign held at one input value can learn from another campaign's samples."""
    base = write_config(kernel_path, budget=40).read_text()
    source_config = kernel_path / "source.toml"
    source_config.write_text(base.replace("batch_size = 20", "batch_size = 5\nfixed = { n = 64 }"))
    source = tmp_path / "source"
    assert main(["--quiet", "tune", str(source_config), "--out", str(source)]) == 0
    stored = Campaign.open(source).store.load()
    # only 10 configurations are valid at n = 64: sampling stops there, on n = 64 alone; the
    # confirmation measures the answer again (the kernel runs live), then sees it deterministic
    distinct = stored.drop_duplicates(["n", "block", "variant"])
    assert set(stored["n"]) == {64} and len(distinct) == 10 and len(stored) == 11
    verification = json.loads((source / "verification.json").read_text())
    assert verification["confirmation"]["remeasured_answers"] == 1
    target_config = kernel_path / "target.toml"
    target_config.write_text(
        base.replace("budget = 40", "budget = 10").replace(
            "batch_size = 20", "batch_size = 5\nfixed = { n = 1000 }"
        )
        + f'\n[transfer]\nsources = ["{source}"]\n'
    )
    target = tmp_path / "target"
    assert main(["--quiet", "tune", str(target_config), "--out", str(target)]) == 0
    campaign = Campaign.open(target)
    assert set(campaign.store.load()["n"]) == {1000}
    assert campaign.meta["details"]["modeling"]["transferred"] == 11
    assert set(campaign.load_optima()["n"]) == {1000}


def test_transfer_source_must_be_a_campaign(
    kernel_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = kernel_path / "bad.toml"
    config.write_text(
        write_config(kernel_path).read_text() + f'\n[transfer]\nsources = ["{tmp_path}"]\n'
    )
    assert main(["--quiet", "tune", str(config), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "[transfer] sources[0]" in err and "not a campaign directory" in err


def test_each_configuration_is_measured_where_it_becomes_valid(
    kernel_path: Path, tmp_path: Path
) -> None:
    """``block <= n``: the confirmation first measures each block at the grid's n where it
    becomes valid (16 at the range's low end, 32, 64, 128; both variants) unless the sampling
    did, taken from the sampling's budget: the campaign still measures its budget, no more."""
    out = tmp_path / "edges"
    config = write_config(kernel_path, budget=120)  # a reserve of 12: room for the 8 edges
    assert main(["--quiet", "tune", str(config), "--out", str(out)]) == 0
    campaign = Campaign.open(out)
    stored = campaign.store.load()
    assert len(stored) == 120
    verification = json.loads((out / "verification.json").read_text())
    # the 8 edge cells less those the sampling happened to measure
    assert 0 < verification["confirmation"]["measured_edges"] <= 8
    cells = set(zip(stored["n"], stored["block"], stored["variant"], strict=True))
    for block in (16, 32, 64, 128):
        for variant in ("fast", "slow"):
            assert (block, block, variant) in cells
    reserve = round(campaign.config.sampling.confirm * 120)
    assert campaign.sampling_budget == 120 - reserve - 8
