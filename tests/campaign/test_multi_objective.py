"""A two-objective campaign: per-point Pareto fronts, chosen configurations valid and
non-dominated, and the declared choice rule respected."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.cli._main import main
from mlkaps_gpu.testing import TOY_CONFIG as BASE_CONFIG
from mlkaps_gpu.testing import TWO_OBJECTIVE_MODULE


@pytest.fixture
def two_objective_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "kernel"
    folder.mkdir()
    (folder / "toy_two.py").write_text(TWO_OBJECTIVE_MODULE)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop("toy_two", None)
    text = BASE_CONFIG.format(function="model", method="lhs", budget=150, batch=50)
    text = text.replace("toy_kernel:model", "toy_two:model")
    text = text.replace(
        "[sampling]", '[objectives]\ntime = "minimize"\nenergy = "minimize"\n\n[sampling]'
    )
    text = text.replace(
        "[optimization]\n",
        '[optimization]\nmethod = "nsga2"\npopulation = 16\n'
        "generations = 20\nweights = [1.0, 1.0]\n",
    )
    path = folder / "two.toml"
    path.write_text(text)
    return path


def _dominates(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all(a <= b) and np.any(a < b))


def test_two_objective_campaign_writes_fronts(two_objective_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    assert main(["--quiet", "tune", str(two_objective_config), "--out", str(out)]) == 0
    campaign = Campaign.open(out)
    optima = campaign.load_optima()
    fronts = pd.read_csv(out / "pareto.csv", keep_default_na=False)
    space = campaign.space
    assert space.is_valid(optima[space.names]).all()
    fronts["variant"] = fronts["variant"].astype(object)
    assert space.is_valid(fronts[space.names]).all()
    objectives = ["predicted_time", "predicted_energy"]
    for index, row in optima.iterrows():
        front = fronts[fronts["n"] == row["n"]]
        assert len(front) >= 1
        chosen = row[objectives].to_numpy(float)
        members = front[objectives].to_numpy(float)
        # the chosen configuration is not dominated by any front member of its point
        assert not any(_dominates(member, chosen) for member in members), index
        # and front members do not dominate each other
        for i, a in enumerate(members):
            for j, b in enumerate(members):
                if i != j:
                    assert not _dominates(a, b)


def test_bounds_rule_picks_best_time_under_the_energy_bound(
    two_objective_config: Path, tmp_path: Path
) -> None:
    text = two_objective_config.read_text().replace(
        "weights = [1.0, 1.0]\n", "bounds = { energy = 1.0 }\n"
    )
    two_objective_config.write_text(text)
    out = tmp_path / "campaign"
    assert main(["--quiet", "tune", str(two_objective_config), "--out", str(out)]) == 0
    optima = Campaign.open(out).load_optima()
    fronts = pd.read_csv(out / "pareto.csv", keep_default_na=False)
    for _, row in optima.iterrows():
        front = fronts[(fronts["n"] == row["n"]) & (fronts["predicted_energy"] <= 1.0)]
        if len(front):
            assert row["predicted_energy"] <= 1.0
            assert row["predicted_time"] <= front["predicted_time"].min() + 1e-12


def test_bounds_must_name_a_secondary_objective(
    two_objective_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = two_objective_config.read_text().replace(
        "weights = [1.0, 1.0]\n", "bounds = { time = 1.0 }\n"
    )
    two_objective_config.write_text(text)
    assert main(["--quiet", "tune", str(two_objective_config), "--out", str(tmp_path / "x")]) == 2
    assert "[optimization] bounds" in capsys.readouterr().err
