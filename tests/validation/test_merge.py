"""``merge``: the expert is kept wherever the tuned configuration is not significantly faster,
and the merged header answers accordingly."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.cli._main import main
from mlkaps_gpu.codegen._compiled import CompiledHeader
from mlkaps_gpu.validation._expert import FixedConfiguration
from mlkaps_gpu.validation._merge import decide, merge
from mlkaps_gpu.validation._validate import Validation, validate

from .test_validate import REFERENCE, kernel_on_path, make_campaign


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    folder = tmp_path_factory.mktemp("merge")
    for _ in kernel_on_path(folder):
        yield make_campaign(folder)


def test_decide_keeps_the_tuned_configuration_only_at_progressions(campaign: Campaign) -> None:
    space = campaign.space
    verdicts = ["progression", "neutral", "regression", "failed"]
    points = pd.DataFrame(
        {
            "n": [100, 200, 300, 400],
            "tuned_block": [8, 16, 32, 64],
            "tuned_variant": ["fast"] * 4,
            "reference_block": [4] * 4,
            "reference_variant": ["slow"] * 4,
            "verdict": verdicts,
        }
    )
    decisions = decide(Validation(points, pd.DataFrame()), space)
    assert decisions["source"].tolist() == ["tuned", "expert", "expert", "expert"]
    assert decisions["block"].tolist() == [8, 4, 4, 4]
    assert decisions["variant"].tolist() == ["fast", "slow", "slow", "slow"]


def test_merge_keeps_the_expert_where_the_tuned_is_not_faster(campaign: Campaign) -> None:
    space = campaign.space
    expert = FixedConfiguration(space, REFERENCE)
    stored = len(campaign.store)
    result = merge(campaign, expert, sizes={"n": 12}, repeats=5)
    before = result.before.points
    faster = before["verdict"] == "progression"
    # the paired kernel: the expert is 2x slower from n = 300 on (unless the header picked
    # the expert's configuration itself), equally fast below
    assert before.loc[before["n"] < 300, "verdict"].isin(["neutral", "same"]).all()
    assert faster.sum() >= 4
    assert (result.decisions["source"] == np.where(faster, "tuned", "expert")).all()

    # the merged header, compiled, answers the decisions at every validation point
    header = result.header
    assert header.name == "toy_merged.h"
    text = header.read_text()
    assert "toy_merged_select" in text
    compiled = CompiledHeader(
        result.selector, text, prefix="toy_merged", build_dir=campaign.directory / "build"
    )
    answers = compiled(before[space.input_names])
    kept = result.decisions
    assert answers["block"].tolist() == kept["block"].tolist()
    assert answers["variant"].tolist() == kept["variant"].tolist()
    slow = (before["n"] < 300).to_numpy()
    assert (answers["block"][slow] == 4).all() and (answers["variant"][slow] == "slow").all()
    assert result.summary["tree_agreement"] == 1.0
    assert result.summary["verification"]["mismatches"] == 0

    # validated again at the same points: same gains, no regression, every sample stored
    after = result.after
    assert after.points["n"].tolist() == before["n"].tolist()
    assert after.summary["regressions"]["count"] == 0
    assert after.summary["geomean_speedup"] == pytest.approx(
        result.before.summary["geomean_speedup"]
    )
    assert (after.points["verdict"] == np.where(faster, "progression", "same")).all()
    assert len(campaign.store) == stored + 2 * (12 * 2 * 5)
    assert result.summary["kept_tuned"] == int(faster.sum())


def test_merge_command_reuses_the_validation_and_writes_before_after(
    campaign: Campaign, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlkaps_gpu.analysis import _plots

    rendered: list[int] = []
    monkeypatch.setattr(_plots, "_png", lambda figure: rendered.append(1) or b"\x89PNG")
    directory = str(campaign.directory)
    reference = ["block=4,variant=slow"]
    expert = FixedConfiguration(campaign.space, REFERENCE)
    validate(campaign, expert, sizes={"n": 8}, repeats=5).save(campaign.directory / "validation")
    validation_run = json.loads((campaign.directory / "validation/summary.json").read_text())
    stored = len(campaign.store)
    assert main(["merge", directory, "--expert", *reference, "--from-validation"]) == 0
    assert len(campaign.store) == stored + 8 * 2 * 5  # only the after-merge validation
    summary = json.loads((campaign.directory / "merge/summary.json").read_text())
    assert summary["before"]["run"] == validation_run["run"]
    assert summary["after"]["run"].startswith("merge-after@")
    assert summary["after"]["regressions"]["count"] == 0
    for stage in ("before", "after"):
        for figure in ("speedup_histogram.png", "speedup_map.png"):
            assert (campaign.directory / "merge" / stage / figure).exists()
    assert len(rendered) == 4
    assert (campaign.directory / "toy_merged.h").exists()
    assert "kept the tuned configuration" in capsys.readouterr().out
    wrong = ["merge", directory, "--expert", "block=8,variant=fast", "--from-validation"]
    assert main(wrong) == 2
    assert "made against" in capsys.readouterr().err
