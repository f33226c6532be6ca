"""``merge``: the expert is kept wherever the tuned configuration is not significantly faster,
and the merged header answers accordingly."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.cli._main import main
from mlkaps_gpu.codegen._compiled import CompiledHeader
from mlkaps_gpu.validation._expert import FixedConfiguration
from mlkaps_gpu.validation._merge import decide, merge
from mlkaps_gpu.validation._validate import Validation, validate

from .paired import REFERENCE, copied_campaign, kernel_on_path


@pytest.fixture(scope="module")
def campaign(paired_tuned: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    folder = tmp_path_factory.mktemp("merge")
    for _ in kernel_on_path(folder):
        yield copied_campaign(paired_tuned, folder)


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


#: The expert (block 4, slow) is 1.5x faster than every other configuration at every size.
EXPERT_WINS_KERNEL = """
def expert_wins(row):
    base = row["n"] / 1000.0 + 0.01
    return base / 1.5 if row["block"] == 4 and row["variant"] == "slow" else base
"""


@pytest.fixture(scope="module")
def expert_wins_campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    import sys
    import textwrap

    from mlkaps_gpu.campaign import parse_config
    from mlkaps_gpu.testing import TOY_CONFIG as BASE_CONFIG

    folder = tmp_path_factory.mktemp("expert_wins")
    kernel = folder / "kernel"
    kernel.mkdir()
    (kernel / "expert_wins_kernel.py").write_text(textwrap.dedent(EXPERT_WINS_KERNEL))
    text = BASE_CONFIG.format(function="expert_wins", method="random", budget=40, batch=20)
    text = text.replace("toy_kernel:", "expert_wins_kernel:")
    path = folder / "wins.toml"
    path.write_text(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(kernel))
        sys.modules.pop("expert_wins_kernel", None)
        campaign = Campaign.create_or_resume(parse_config(text, path=path), folder / "run")
        campaign.run()
        yield campaign
    sys.modules.pop("expert_wins_kernel", None)


def test_merge_gives_the_expert_back_when_no_tuned_choice_wins(
    expert_wins_campaign: Campaign, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign = expert_wins_campaign
    directory = str(campaign.directory)
    code = main(["merge", directory, "--expert", "block=4,variant=slow", "--grid", "8"])
    assert code == 0
    out = capsys.readouterr().out
    assert "the expert ships" in out
    summary = json.loads((campaign.directory / "merge/summary.json").read_text())
    assert summary["shipped"] == "expert"
    assert summary["header"] is None
    assert summary["kept_tuned"] == 0
    # nothing merged is left where a build would pick it up; the rejected header is kept aside
    assert not (campaign.directory / "toy_merged.h").exists()
    assert (campaign.directory / summary["rejected_header"]).exists()
    # the headroom: around the expert nothing is faster, so the expert is its own best
    headroom = summary["headroom"]
    assert 1 <= len(headroom["points"]) <= 8
    assert all(row["headroom"] == pytest.approx(1.0) for row in headroom["points"])
    # wherever the header did not pick the expert's configuration, it measured slower
    before = summary["before"]
    assert before["progressions"]["count"] == 0


def test_ships_only_without_regressions_and_with_a_geomean_of_at_least_one() -> None:
    from mlkaps_gpu.validation import ships

    def validation(verdicts: list[str], geomean: float) -> Validation:
        return Validation(
            pd.DataFrame({"verdict": verdicts}), pd.DataFrame(), {"geomean_speedup": geomean}
        )

    assert ships(validation(["progression", "neutral", "same"], 1.2))
    assert not ships(validation(["progression", "regression"], 1.5))
    assert not ships(validation(["neutral", "neutral"], 0.97))
