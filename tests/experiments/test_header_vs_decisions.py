"""experiments/header_vs_decisions.py: a replay campaign's decisions and its header, both scored
against the truth of a small AutoHeuristic file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.experiments._scripts import load_benchkit, load_script
from tests.experiments.test_bench_inputs import write_ah_file

script = load_script("header_vs_decisions")
truth_module = load_benchkit("inputs_truth")


def test_decisions_and_header_scored_at_every_shape(tmp_path):
    data = write_ah_file(tmp_path / "tiny_gpu.txt.gz")
    out = tmp_path / "results"
    argv = ["--data", str(data), "--share", "40", "--seeds", "0", "--out", str(out)]
    assert script.main([*argv, "--workdir", str(tmp_path / "campaigns")]) == 0
    frame = pd.read_csv(out / "header_vs_decisions_tiny_gpu.csv", comment="#")
    assert len(frame) == 1
    row = frame.iloc[0]
    assert 0 < row["decisions"] <= 1 and 0 < row["header"] <= 1
    assert 0 <= row["shapes_answered_otherwise"] <= 24
    # the decisions are those of optima.csv, one per shape of the truth
    truth = truth_module.autoheuristic_truth(data)
    folders = list((tmp_path / "campaigns").glob("tiny_gpu_B*_s0"))
    assert len(folders) == 1
    optima = pd.read_csv(folders[0] / "optima.csv")
    decided, measured = script.decision_answers(truth, optima)
    assert (decided >= 0).all()
    assert measured.sum() == row["measured_shapes"] == (optima["source"] == "measured").sum()
    assert 0 < row["ceiling"] <= row["best_of_its_configs"] <= 1
    fractions = truth_module.point_fractions(truth, decided)
    assert row["decisions"] == pytest.approx(np.exp(np.log(fractions).mean()))
    text = (out / "header_vs_decisions_tiny_gpu.md").read_text()
    assert "commit:" in text and "## Depth sweeps" in text
    with pytest.raises(ValueError, match="1 shapes have no decision"):
        script.decision_answers(truth, optima.iloc[1:])


def test_learnable_ceiling_knows_a_rule_of_the_inputs_and_not_noise():
    """Config 0 is best below x = 50 and config 1 above: a forest fitted on the other shapes
    gets every held-out shape right but next to the switch. With the best chosen by a coin, it
    cannot."""
    xs = np.arange(1, 101)
    rule = np.where(xs[:, None] < 50, [1.0, 2.0], [2.0, 1.0])
    truth = truth_module.Truth(
        "rule", pd.DataFrame({"x": xs}), pd.DataFrame({"c": [0, 1]}), ["0", "1"], rule, ["x"], []
    )
    ruled = script.learnable_ceiling(truth, np.array([0, 1]), 0)
    assert np.count_nonzero(ruled < 1.0) <= 2 and (ruled[40:60] < 1.0).sum() == (ruled < 1.0).sum()
    coin = np.random.default_rng(0).integers(0, 2, size=100)
    noise = np.where(coin[:, None] == 0, [1.0, 2.0], [2.0, 1.0])
    truth = truth_module.Truth(
        "noise", pd.DataFrame({"x": xs}), pd.DataFrame({"c": [0, 1]}), ["0", "1"], noise, ["x"], []
    )
    assert script.learnable_ceiling(truth, np.array([0, 1]), 0).mean() < 0.85


@pytest.mark.parametrize("option", [["--share", "0"], ["--max-configs", "many"]])
def test_bad_options_exit_2(tmp_path, option):
    data = write_ah_file(tmp_path / "tiny_gpu.txt.gz")
    with pytest.raises(SystemExit) as stopped:
        script.main(["--data", str(data), *option, "--out", str(tmp_path)])
    assert stopped.value.code == 2
