"""Decisions from evidence: measurements outrank optimistic predictions, noise from the raw
repeats, measured regret, and the predicted column describes the shipped configuration."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign._decisions import (
    NOISE_FLOOR,
    Evidence,
    EvidenceScore,
    decide,
)
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.surrogate import BootstrapEnsemble

GPUS = ("a", "b")


def space() -> Space:
    return Space(
        [Parameter("gpu", "categorical", values=GPUS)],
        [Parameter("x", "int", values=tuple(range(1, 11)))],
    )


def samples(rows: list[tuple[str, int, float]], spread: float = 0.0) -> pd.DataFrame:
    """Store-like rows: inputs, design, time, status and raw repeat times."""
    table = pd.DataFrame(rows, columns=["gpu", "x", "time"])
    table["status"] = "ok"
    table["n_repeats"] = 5
    table["raw_times"] = [
        json.dumps(list(t * (1 + spread * np.array([-2, -1, 0, 1, 2])))) for t in table["time"]
    ]
    return table


class FixedModel(BootstrapEnsemble):
    """An 'ensemble' whose mean and sd are given per x (log space), for exact tests."""

    def __init__(self, mean: dict[int, float], sd: float) -> None:
        super().__init__(members=2, log_target=True)
        self.mean_by_x = mean
        self.sd = sd

    def predict_log(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = features[:, 1].astype(int)
        mean = np.array([self.mean_by_x[int(v)] for v in x])
        return mean, np.full(len(x), self.sd)

    def _predict(self, features: np.ndarray) -> np.ndarray:
        return np.exp(self.predict_log(features)[0])


def grid_row(gpu: str, x: int, predicted: float) -> pd.DataFrame:
    return pd.DataFrame({"gpu": [gpu], "x": [x], "predicted_time": [predicted], "n_valid": [10]})


def test_best_measured_beats_an_uncertain_optimistic_prediction() -> None:
    sp = space()
    evidence = Evidence(samples([("a", 3, 1.0), ("a", 5, 1.2)]), sp, "time")
    # the model believes x = 9 is 10 % faster than x = 3, but its sd is 0.2 (20 %)
    model = FixedModel({x: 0.0 for x in range(1, 11)} | {9: np.log(0.9)}, sd=0.2)
    decided = decide(grid_row("a", 9, 0.9), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["x"].iloc[0] == 3
    assert decided["source"].iloc[0] == "measured"
    assert decided["measured_time"].iloc[0] == pytest.approx(1.0)


def test_a_confident_prediction_far_below_the_measurements_wins() -> None:
    sp = space()
    evidence = Evidence(samples([("a", 3, 1.0)]), sp, "time")
    model = FixedModel({x: 0.0 for x in range(1, 11)} | {9: np.log(0.5)}, sd=0.05)
    decided = decide(grid_row("a", 9, 0.5), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["x"].iloc[0] == 9
    assert decided["source"].iloc[0] == "surrogate"
    assert np.isnan(decided["measured_time"].iloc[0])


def test_predicted_column_is_the_prediction_of_the_shipped_configuration() -> None:
    sp = space()
    evidence = Evidence(samples([("a", 3, 1.0)]), sp, "time")
    model = FixedModel({x: np.log(2.0 + x) for x in range(1, 11)}, sd=0.3)
    decided = decide(grid_row("a", 9, 123.0), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["x"].iloc[0] == 3
    assert decided["predicted_time"].iloc[0] == pytest.approx(5.0)  # exp(log(2 + 3))


def test_other_points_incumbents_are_candidates() -> None:
    sp = space()
    # gpu b measured twice: its best (x = 7) is carried to gpu a, where the model likes it
    evidence = Evidence(samples([("b", 7, 0.5), ("b", 2, 2.0)]), sp, "time")
    model = FixedModel({x: 0.0 for x in range(1, 11)} | {7: np.log(0.6)}, sd=0.05)
    decided = decide(grid_row("a", 1, 1.0), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["x"].iloc[0] == 7


def test_noise_comes_from_the_raw_repeats_with_a_floor() -> None:
    sp = space()
    quiet = Evidence(samples([("a", 3, 1.0)], spread=0.0), sp, "time")
    noisy = Evidence(samples([("a", 3, 1.0)], spread=0.1), sp, "time")
    assert quiet.table["_se"].iloc[0] == pytest.approx(NOISE_FLOOR)
    expected = np.std(1 + 0.1 * np.array([-2, -1, 0, 1, 2]), ddof=1) / np.sqrt(5)
    assert noisy.table["_se"].iloc[0] == pytest.approx(expected)
    assert quiet.log_space
    assert quiet.table["_f"].iloc[0] == pytest.approx(0.0)


def test_repeated_measurements_are_averaged() -> None:
    sp = space()
    evidence = Evidence(samples([("a", 3, 1.0), ("a", 3, np.e**2)]), sp, "time")
    assert len(evidence.table) == 1
    assert evidence.table["_f"].iloc[0] == pytest.approx(1.0)  # mean of the logs
    assert evidence.table["_n"].iloc[0] == 2


def test_maximised_objective_is_signed() -> None:
    sp = space()
    evidence = Evidence(samples([("a", 3, 10.0), ("a", 4, 20.0)]), sp, "time", maximize=True)
    model = FixedModel({x: np.log(15.0) for x in range(1, 11)}, sd=1.0)
    decided = decide(grid_row("a", 5, 15.0), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["x"].iloc[0] == 4


def test_measured_regret_known_only_where_both_were_measured() -> None:
    sp = space()
    evidence = Evidence(samples([("a", 3, 1.0), ("a", 5, 1.5), ("b", 5, 2.0)]), sp, "time")
    score = EvidenceScore(evidence, FixedModel({x: 0.0 for x in range(1, 11)}, 0.1), sp)
    table = pd.DataFrame({"gpu": ["a", "a", "b"], "x": [5, 6, 3]})
    decisions = pd.DataFrame({"gpu": ["a", "a", "b"], "x": [3, 3, 5]})
    regret = score.measured_regret(table, decisions)
    assert regret[0] == pytest.approx(0.5)
    assert np.isnan(regret[1]) and np.isnan(regret[2])


def with_failures(table: pd.DataFrame, rows: list[tuple[str, int]]) -> pd.DataFrame:
    """``table`` with failed runs (status runtime_error, no time) of ``rows`` appended."""
    failed = pd.DataFrame(rows, columns=["gpu", "x"]).assign(
        time=np.nan, status="runtime_error", n_repeats=0, raw_times="[]"
    )
    return pd.concat([table, failed], ignore_index=True)


def test_a_configuration_that_failed_there_is_never_the_decision() -> None:
    sp = space()
    # x = 9 failed on gpu a: the model, trained on the successes only, predicts it fastest
    store = with_failures(samples([("a", 3, 1.0), ("b", 9, 0.5), ("b", 2, 2.0)]), [("a", 9)])
    evidence = Evidence(store, sp, "time")
    model = FixedModel({x: 0.0 for x in range(1, 11)} | {9: np.log(0.3)}, sd=0.01)
    score = EvidenceScore(evidence, model, sp)
    decided = decide(grid_row("a", 9, 0.3), score, sp, "time")
    assert decided["x"].iloc[0] == 3
    assert decided["source"].iloc[0] == "measured"
    # on gpu b, where it ran, it stays the decision; the failure counts only where it failed
    assert decide(grid_row("b", 9, 0.3), score, sp, "time")["x"].iloc[0] == 9
    table = pd.DataFrame({"gpu": ["a", "a", "b"], "x": [9, 3, 9]})
    assert evidence.failed(table).tolist() == [True, False, False]
    assert evidence.tried(table).tolist() == [True, True, True]
    # the trees' score puts it below anything measured (worst + range, at least e times)
    assert score.score(table.iloc[[0]])[0] > 2.0 * np.e


def test_a_configuration_that_also_ran_is_not_failed() -> None:
    sp = space()
    store = with_failures(samples([("a", 3, 1.0), ("a", 4, 2.0)]), [("a", 3)])
    evidence = Evidence(store, sp, "time")
    assert not evidence.failed(pd.DataFrame({"gpu": ["a"], "x": [3]}))[0]
    model = FixedModel({x: 0.0 for x in range(1, 11)}, sd=0.5)
    decided = decide(grid_row("a", 7, 1.0), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["x"].iloc[0] == 3


def test_a_point_whose_only_candidate_failed_says_so() -> None:
    sp = space()
    store = with_failures(samples([("b", 2, 1.0)]), [("a", 9)])
    evidence = Evidence(store, sp, "time")
    model = FixedModel({x: 0.0 for x in range(1, 11)}, sd=0.1)
    decided = decide(grid_row("a", 9, 1.0), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["source"].iloc[0] == "failed"


def test_only_measured_at_ships_a_measured_configuration_where_asked() -> None:
    sp = space()
    evidence = Evidence(samples([("a", 3, 1.0), ("a", 5, 1.2), ("b", 2, 1.0)]), sp, "time")
    # a confident prediction wins on gpu a (as above) until the point is made strict
    model = FixedModel({x: 0.0 for x in range(1, 11)} | {9: np.log(0.5)}, sd=0.05)
    score = EvidenceScore(evidence, model, sp)
    assert decide(grid_row("a", 9, 0.5), score, sp, "time")["x"].iloc[0] == 9
    strict = score.only_measured_at(pd.DataFrame({"gpu": ["a", "b"]}))
    decided = decide(grid_row("a", 9, 0.5), strict, sp, "time")
    assert decided["x"].iloc[0] == 3
    assert decided["source"].iloc[0] == "measured"
    table = pd.DataFrame({"gpu": ["a", "a", "b", "b"], "x": [9, 3, 9, 2]})
    # unmeasured there: below anything measured for the trees; measured rows keep their value
    values = strict.score(table)  # the penalty: e times the worst measured (1.2)
    assert values == pytest.approx([1.2 * np.e, 1.0, 1.2 * np.e, 1.0], rel=0.01)
    # the original score is unchanged, and a point without measurements stays with the model
    assert score.score(table)[0] < 1.0
    only_a = score.only_measured_at(pd.DataFrame({"gpu": ["a"]}))
    assert only_a.score(pd.DataFrame({"gpu": ["b"], "x": [9]}))[0] < 1.0


def test_only_measured_at_leaves_a_point_without_measurements_to_the_model() -> None:
    sp = space()
    evidence = Evidence(samples([("b", 7, 0.9), ("b", 2, 2.0)]), sp, "time")
    model = FixedModel({x: 0.0 for x in range(1, 11)} | {9: np.log(0.5)}, sd=0.05)
    strict = EvidenceScore(evidence, model, sp).only_measured_at(pd.DataFrame({"gpu": ["a"]}))
    assert len(strict.strict) == 0  # gpu a has no measurement: nothing to ship instead
    assert decide(grid_row("a", 9, 0.5), strict, sp, "time")["x"].iloc[0] == 9
