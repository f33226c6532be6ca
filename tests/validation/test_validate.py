"""``validate``: offset grid, interleaved measurements stored as samples, per-point statistics."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign, CampaignError, EnvironmentMismatchWarning
from mlkaps_gpu.cli._main import main
from mlkaps_gpu.validation._expert import (
    FixedConfiguration,
    TableReference,
    campaign_header,
    resolve_reference,
)
from mlkaps_gpu.validation._paired_statistics import (
    cost_matrices,
    noise_threshold,
    paired_differences,
    point_statistics,
    summarize,
)
from mlkaps_gpu.validation._validate import validate
from mlkaps_gpu.validation._validation_grid import parse_grid, validation_grid

from .paired import (
    REFERENCE,
    copied_campaign,
    kernel_on_path,
    paired_time,
)


@pytest.fixture(scope="module")
def campaign(paired_tuned: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    folder = tmp_path_factory.mktemp("validate")
    for _ in kernel_on_path(folder):
        yield copied_campaign(paired_tuned, folder)


def test_validation_grid_lies_between_the_optimization_grid_points(campaign: Campaign) -> None:
    space = campaign.sampling_space
    assert parse_grid("12", space) == {"n": 12}
    assert parse_grid("n=7", space) == {"n": 7}
    with pytest.raises(CampaignError, match="sizes"):
        parse_grid("4x4", space)
    with pytest.raises(CampaignError, match="unknown input"):
        parse_grid("m=4", space)
    points = validation_grid(space, {"n": 24})
    optimization = campaign.grid()
    assert len(points) == 24
    assert not set(points["n"]) & set(optimization["n"])
    # geometric cell centres: the first lies half a (log) cell above the low end
    assert points["n"].iloc[0] == round(16 * (4096 / 16) ** (0.5 / 24))
    assert points["n"].is_monotonic_increasing


def test_validate_stores_every_measurement_and_gets_the_known_speedups(
    campaign: Campaign,
) -> None:
    stored = len(campaign.store)
    reference = FixedConfiguration(campaign.space, REFERENCE)
    validation = validate(campaign, reference, sizes={"n": 12}, repeats=5)
    points = validation.points

    # every measurement is a sample of the store, tagged with its run and side
    table = campaign.store.load()
    new = table.iloc[stored:]
    assert len(new) == 12 * 2 * 5 == len(validation.measurements)
    run_tag = validation.summary["run"]
    assert new["message"].str.contains(f"origin={run_tag}:").all()
    assert new["message"].str.contains(":tuned:round").sum() == 60
    # interleaved: each point's pair is adjacent and the order alternates between rounds
    first = validation.measurements[validation.measurements["order"] == 0]
    order = first.pivot_table(index="point", columns="round", values="side", aggfunc="first")
    assert (order[0] != order[1]).all() and (order[0] == order[2]).all()

    expected = np.array(
        [
            paired_time(n, 4, "slow") / paired_time(n, b, v)
            for n, b, v in points[["n", "tuned_block", "tuned_variant"]].itertuples(index=False)
        ]
    )
    assert np.allclose(points["speedup"], expected)
    assert set(np.round(expected, 9)) <= {1.0, 2.0}
    assert (expected == 2.0).sum() >= 4
    same = (points["tuned_block"] == 4) & (points["tuned_variant"] == "slow")
    verdicts = np.where(expected > 1.5, "progression", np.where(same, "same", "neutral"))
    assert (points["verdict"] == verdicts).all()
    assert (points["reference_block"] == 4).all() and (points["reference_variant"] == "slow").all()

    summary = validation.summary
    assert summary["geomean_speedup"] == pytest.approx(math.exp(np.mean(np.log(expected))))
    assert summary["progressions"]["share"] == pytest.approx(np.mean(expected > 1.5))
    assert summary["progressions"]["mean_speedup"] == pytest.approx(2.0)
    assert summary["regressions"] == {"count": 0, "share": 0.0, "mean_slowdown": None}
    assert summary["worst"]["speedup"] == pytest.approx(expected.min())
    assert summary["noise_threshold"] == 0.0  # a deterministic kernel has no noise
    assert summary["measurements"] == 120 and summary["repeats"] == 5


def _synthetic(seed: int, sigma: float, repeats: int = 5) -> dict[str, np.ndarray]:
    """40 points: tuned 2x faster at 0-9, 2x slower at 10-19, equal elsewhere (log costs)."""
    rng = np.random.default_rng(seed)
    truth = np.zeros(40)
    truth[:10], truth[10:20] = -math.log(2), math.log(2)
    reference = np.log(1e-3) + rng.normal(0, sigma, (40, repeats))
    tuned = np.log(1e-3) + truth[:, None] + rng.normal(0, sigma, (40, repeats))
    return {"tuned": tuned, "reference": reference}


def test_statistics_find_the_known_progressions_and_regressions_under_noise() -> None:
    costs = _synthetic(seed=5, sigma=0.05)
    rng = np.random.default_rng(0)
    noise = noise_threshold(paired_differences(costs), rng)
    same = np.zeros(40, dtype=bool)
    same[-5:] = True
    table = point_statistics(costs, same, alpha=0.05, noise_log=noise)
    verdicts = table["verdict"].to_numpy()
    assert (verdicts[:10] == "progression").all() and (verdicts[10:20] == "regression").all()
    assert (verdicts[-5:] == "same").all()
    # equal configurations: at most the expected handful of false calls (alpha = 1/32 per side)
    assert np.sum(verdicts[20:35] != "neutral") <= 1
    assert np.allclose(table["speedup"][:10], 2.0, rtol=0.1)
    assert np.allclose(table["speedup"][10:20], 0.5, rtol=0.1)
    assert np.allclose(table["p_faster"][:10], 1 / 32)  # all five rounds agree: the floor
    table = table.assign(n=np.arange(40), same_configuration=same)
    summary = summarize(table, ["n"])
    progressions = int(np.sum(verdicts == "progression"))
    assert summary["progressions"]["share"] == progressions / 40
    assert summary["regressions"]["mean_slowdown"] == pytest.approx(
        float(np.mean(1.0 / table["speedup"][verdicts == "regression"]))
    )
    assert summary["worst"]["speedup"] == pytest.approx(table["speedup"][:35].min())
    assert summary["geomean_speedup"] == pytest.approx(
        math.exp(float(np.mean(np.log(table["speedup"]))))
    )


def test_noise_threshold_follows_the_spread_and_failed_points_are_failed() -> None:
    rng = np.random.default_rng(0)
    quiet = noise_threshold(paired_differences(_synthetic(1, 0.01)), rng)
    loud = noise_threshold(paired_differences(_synthetic(1, 0.2)), rng)
    assert 0 < np.median(quiet) < 0.05 < np.median(loud)
    assert np.all(noise_threshold(paired_differences(_synthetic(1, 0.0)), rng) == 0)
    # one wild round out of five moves the threshold very little
    wild = np.array([[0.01, -0.01, 0.02, 0.0, 5.0]])
    assert noise_threshold(wild, rng)[0] < 0.05
    # a point whose tuned measurements all failed cannot be decided
    measurements = pd.DataFrame(
        {
            "point": [0, 0, 0, 0, 1, 1, 1, 1],
            "round": [0, 0, 1, 1, 0, 0, 1, 1],
            "side": ["tuned", "reference"] * 4,
            "value": [1.0, 2.0, 1.0, 2.0, np.nan, 2.0, np.nan, 2.0],
            "status": ["ok"] * 4 + ["runtime_error", "ok", "runtime_error", "ok"],
        }
    )
    costs = cost_matrices(measurements, 2, 2, maximize=False)
    table = point_statistics(costs, np.zeros(2, dtype=bool), alpha=0.05, noise_log=np.zeros(2))
    assert table["verdict"].tolist() == ["neutral", "failed"]
    assert table["speedup"][0] == pytest.approx(2.0)


def test_references_from_a_table_a_callable_and_a_campaign(
    campaign: Campaign, tmp_path: Path
) -> None:
    points = pd.DataFrame({"n": [20, 100, 3000]})
    table = tmp_path / "expert.csv"
    table.write_text("n,block,variant\n16,4,slow\n1000,64,fast\n")
    answer = resolve_reference(str(table), campaign)
    assert isinstance(answer, TableReference)
    got = answer.configurations(points)
    assert got["block"].tolist() == [4, 4, 64] and got["variant"].tolist() == [
        "slow",
        "slow",
        "fast",
    ]
    called = resolve_reference("validate_kernel:expert", campaign).configurations(points)
    assert (called["block"] == 4).all() and (called["variant"] == "slow").all()
    itself = resolve_reference(str(campaign.directory), campaign).configurations(points)
    assert itself.equals(campaign_header(campaign).configurations(points))
    with pytest.raises(CampaignError, match="no expert default"):
        resolve_reference("expert", campaign)
    with pytest.raises(CampaignError, match="design parameter"):
        resolve_reference("block=4", campaign)
    with pytest.raises(CampaignError, match="not one of"):
        resolve_reference("block=5,variant=slow", campaign).configurations(points)


def test_validate_command_writes_summary_table_and_figures(
    campaign: Campaign, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(Campaign, "environment_warnings", lambda self: ["cpu: A != B"])
    argv = ["validate", str(campaign.directory), "--reference", "block=4,variant=slow"]
    assert main([*argv, "--grid", "6", "--repeats", "4"]) == 0
    printed = capsys.readouterr()
    assert "warning:" in printed.err and "cpu: A != B" in printed.err
    assert "geometric-mean speedup" in printed.out
    folder = campaign.directory / "validation"
    for name in ("summary.json", "points.csv", "measurements.csv"):
        assert (folder / name).exists(), name
    for name in ("speedup_map.png", "speedup_histogram.png"):
        assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["environment_warnings"] == ["cpu: A != B"]
    assert summary["points"] == 6 and summary["repeats"] == 4
    assert len(pd.read_csv(folder / "points.csv")) == 6
    # a bad reference is one line on stderr and exit status 2
    assert main(["validate", str(campaign.directory), "--reference", "block=3"]) == 2
    assert "design parameter" in capsys.readouterr().err
    # the Python API warns instead
    with pytest.warns(EnvironmentMismatchWarning, match="cpu: A != B"):
        validate(campaign, FixedConfiguration(campaign.space, REFERENCE), sizes={"n": 2})
