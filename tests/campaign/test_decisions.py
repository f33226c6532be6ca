"""Decisions from evidence: measurements outrank optimistic predictions, noise from the raw
repeats, measured regret, and the predicted column describes the shipped configuration."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import mlkaps_gpu.campaign._decisions as decisions_module
import mlkaps_gpu.campaign._portfolio as portfolio_module
from mlkaps_gpu.campaign._decisions import (
    DECIDE_KAPPA,
    NOISE_FLOOR,
    Evidence,
    EvidenceScore,
    decide,
)
from mlkaps_gpu.campaign._portfolio import (
    auto_portfolio,
    limit_configurations,
    measured_loss,
    portfolio_size,
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
        x = features[:, -1].astype(int)  # the design parameter, last
        mean = np.array([self.mean_by_x[int(v)] for v in x])
        return mean, np.full(len(x), self.sd)

    def _predict(self, features: np.ndarray) -> np.ndarray:
        return np.exp(self.predict_log(features)[0])


def grid_row(gpu: str, x: int, predicted: float) -> pd.DataFrame:
    return pd.DataFrame({"gpu": [gpu], "x": [x], "predicted_time": [predicted], "n_valid": [10]})


def test_best_measured_beats_an_uncertain_optimistic_prediction() -> None:
    sp = space()
    evidence = Evidence(samples([("a", 3, 1.0), ("a", 5, 1.2)]), sp, "time")
    # the model believes x = 9 is faster than x = 3 by less than kappa sd (sd 0.2: 20 %)
    faster = np.exp(-0.8 * DECIDE_KAPPA * 0.2)
    model = FixedModel({x: 0.0 for x in range(1, 11)} | {9: np.log(faster)}, sd=0.2)
    decided = decide(grid_row("a", 9, faster), EvidenceScore(evidence, model, sp), sp, "time")
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


class SpreadModel(FixedModel):
    """A FixedModel whose members' spread is given per x too."""

    def __init__(self, mean: dict[int, float], sd: dict[int, float]) -> None:
        super().__init__(mean, sd=0.0)
        self.sd_by_x = sd

    def predict_log(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, _ = super().predict_log(features)
        x = features[:, -1].astype(int)
        return mean, np.array([self.sd_by_x[int(v)] for v in x])


def test_among_admissible_guesses_the_mean_decides_not_the_spread() -> None:
    """Two stages: the pessimistic estimate says which guesses may replace the point's
    measurements (every guess where nothing was measured); among those, the lower mean wins,
    whatever the members' spread."""
    sp = space()
    mean = {x: np.log(2.0) for x in range(1, 11)} | {4: np.log(0.9), 6: 0.0}
    spread = {x: 0.05 for x in range(1, 11)} | {4: 0.4}
    model = SpreadModel(mean, spread)
    # nothing measured at gpu "a": x = 4 has the lower mean (0.9 against 1.0) and the wider
    # spread, so the pessimistic estimate alone ships x = 6
    assert 0.0 + DECIDE_KAPPA * 0.05 < np.log(0.9) + DECIDE_KAPPA * 0.4
    evidence = Evidence(samples([("b", 1, 3.0)]), sp, "time")
    decided = decide(grid_row("a", 6, 1.0), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["x"].iloc[0] == 4
    assert decided["source"].iloc[0] == "surrogate"
    # a measurement that both guesses' pessimistic estimates fail to beat stays
    evidence = Evidence(samples([("a", 3, 0.95)]), sp, "time")
    decided = decide(grid_row("a", 6, 1.0), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["x"].iloc[0] == 3
    # one that only x = 6 beats by its pessimistic estimate: x = 6, not the lower mean of x = 4
    evidence = Evidence(samples([("a", 3, 1.05)]), sp, "time")
    decided = decide(grid_row("a", 6, 1.0), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["x"].iloc[0] == 6


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


def test_a_point_whose_only_candidate_failed_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    sp = space()
    store = with_failures(samples([("b", 2, 1.0)]), [("a", 9)])
    evidence = Evidence(store, sp, "time")
    model = FixedModel({x: 0.0 for x in range(1, 11)}, sd=0.1)
    # with every valid design a candidate, another one ships
    decided = decide(grid_row("a", 9, 1.0), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["source"].iloc[0] == "surrogate"
    assert decided["x"].iloc[0] != 9
    # too many to enumerate: the optimizer's choice is the only candidate, and it failed
    monkeypatch.setattr(decisions_module, "ENUMERATED_CANDIDATES", 0)
    decided = decide(grid_row("a", 9, 1.0), EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["source"].iloc[0] == "failed"


def test_every_valid_design_is_a_candidate_where_they_are_few(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The grid optimizer's choice comes from another model: the ensemble decides among every
    valid design of the point where the space enumerates them (a table replay's listed ones)."""
    sp = space()
    evidence = Evidence(samples([("b", 2, 1.0)]), sp, "time")
    model = FixedModel({x: 0.0 for x in range(1, 11)} | {6: np.log(0.2)}, sd=0.05)
    score = EvidenceScore(evidence, model, sp)
    assert decide(grid_row("a", 4, 1.0), score, sp, "time")["x"].iloc[0] == 6
    with monkeypatch.context() as patch:
        patch.setattr(decisions_module, "ENUMERATED_CANDIDATES", 5)  # 10 rows in all: too many
        assert decide(grid_row("a", 4, 1.0), score, sp, "time")["x"].iloc[0] == 4
    # 10 designs at the point: too many for the ensemble's argmin to be trusted among them
    monkeypatch.setattr(decisions_module, "ENUMERATED_PER_POINT", 9)
    assert decide(grid_row("a", 4, 1.0), score, sp, "time")["x"].iloc[0] == 4


def test_only_measured_at_guards_measurements_with_the_model_error() -> None:
    """At a strict point (five configurations measured there), an unmeasured configuration
    must beat the measured ones by kappa times the model's calibrated error: a prediction better
    by half of that (out-of-bag error 1) does not ship; one 100x better does."""
    sp = space()
    rows = [("a", x, 1.0 + 0.1 * x) for x in (1, 2, 3, 4, 5)] + [("b", 2, 1.0)]
    evidence = Evidence(samples(rows), sp, "time")
    faster = 1.1 * np.exp(-0.5 * DECIDE_KAPPA * 1.0)  # than the best measured at a (1.1)
    model = FixedModel({x: 0.0 for x in range(1, 11)} | {9: np.log(faster)}, sd=0.05)
    score = EvidenceScore(evidence, model, sp, model_error=1.0)
    assert decide(grid_row("a", 9, faster), score, sp, "time")["x"].iloc[0] == 9
    strict = score.only_measured_at(pd.DataFrame({"gpu": ["a", "b"]}))
    assert strict.strict["gpu"].tolist() == ["a"]  # b has one measured configuration
    decided = decide(grid_row("a", 9, faster), strict, sp, "time")
    assert decided["x"].iloc[0] == 1
    assert decided["source"].iloc[0] == "measured"
    # on b, one measurement says nothing of the best: the prediction ships
    assert decide(grid_row("b", 9, faster), strict, sp, "time")["x"].iloc[0] == 9
    # unless it was the decisions' answer at b, measured by the confirmation (decision 0053)
    answered = score.only_measured_at(
        pd.DataFrame({"gpu": ["a", "b"]}), answered=pd.DataFrame({"gpu": ["b"]})
    )
    assert answered.strict["gpu"].tolist() == ["a", "b"]
    decided = decide(grid_row("b", 9, faster), answered, sp, "time")
    assert decided["x"].iloc[0] == 2
    assert decided["source"].iloc[0] == "measured"
    # the guard is the model's error in quadrature with the spread, not a penalty
    table = pd.DataFrame({"gpu": ["a", "a"], "x": [9, 1]})
    values = strict.score(table)
    guarded = faster * np.exp(DECIDE_KAPPA * np.hypot(0.05, 1.0))
    assert values == pytest.approx([guarded, 1.1], rel=0.01)
    far = EvidenceScore(
        evidence,
        FixedModel({x: 0.0 for x in range(1, 11)} | {9: np.log(0.01)}, sd=0.05),
        sp,
        model_error=1.0,
    ).only_measured_at(pd.DataFrame({"gpu": ["a"]}))
    assert decide(grid_row("a", 9, 0.01), far, sp, "time")["x"].iloc[0] == 9


def test_one_slow_measurement_does_not_outrank_a_far_faster_prediction() -> None:
    """The demo's failure: one slow configuration measured at a size (50 ms) must not ship
    there when the model predicts another 100x faster, whatever the confirmation left."""
    sp = space()
    evidence = Evidence(samples([("a", 1, 0.05)]), sp, "time")
    model = FixedModel({x: np.log(0.05) for x in range(1, 11)} | {8: np.log(0.0005)}, sd=0.3)
    score = EvidenceScore(evidence, model, sp, model_error=0.5)
    for candidate in (score, score.only_measured_at(pd.DataFrame({"gpu": ["a"]}))):
        decided = decide(grid_row("a", 8, 0.0005), candidate, sp, "time")
        assert decided["x"].iloc[0] == 8
        assert decided["source"].iloc[0] == "surrogate"
        assert decided["best_known_time"].iloc[0] == pytest.approx(0.0005, rel=1e-6)


def test_neighbours_best_measured_configurations_are_candidates() -> None:
    """On an input with many values, the best measured configuration of a nearby size is a
    candidate at a grid point the optimizer answered otherwise (measured once there, it is no
    incumbent carried everywhere)."""
    sp = Space(
        [Parameter("n", "int", low=10, high=1000, log=True)],
        [Parameter("x", "int", values=tuple(range(1, 11)))],
    )
    evidence = Evidence(
        pd.concat(
            [
                samples([("a", 7, 0.2)]).assign(n=[100]),
                samples([("a", 3, 0.9), ("a", 2, 1.0)]).assign(n=[900, 900]),
            ]
        ).drop(columns="gpu"),
        sp,
        "time",
    )

    class ByX(FixedModel):
        def predict_log(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            x = features[:, -1].astype(int)  # the design parameter, last
            return np.where(x == 7, np.log(0.25), 0.0), np.full(len(x), 0.01)

    model = ByX({}, sd=0.01)
    grid = pd.DataFrame({"n": [110], "x": [5], "predicted_time": [1.0], "n_valid": [10]})
    decided = decide(grid, EvidenceScore(evidence, model, sp), sp, "time")
    assert decided["x"].iloc[0] == 7


def test_only_measured_at_leaves_a_point_without_measurements_to_the_model() -> None:
    sp = space()
    evidence = Evidence(samples([("b", 7, 0.9), ("b", 2, 2.0)]), sp, "time")
    model = FixedModel({x: 0.0 for x in range(1, 11)} | {9: np.log(0.5)}, sd=0.05)
    strict = EvidenceScore(evidence, model, sp).only_measured_at(pd.DataFrame({"gpu": ["a"]}))
    assert len(strict.strict) == 0  # gpu a has no measurement: nothing to ship instead
    assert decide(grid_row("a", 9, 0.5), strict, sp, "time")["x"].iloc[0] == 9


def test_limit_configurations_keeps_the_portfolio_that_loses_least() -> None:
    """Four points whose best configurations are 1, 2, 3 and 4; configuration 5 (measured,
    never decided) is within 10 % of the best everywhere. With two configurations allowed, 5
    is kept first and one point's own best second; every point takes its better member."""
    sp = Space(
        [Parameter("n", "int", values=(1, 2, 3, 4))],
        [Parameter("x", "int", values=tuple(range(1, 11)))],
    )
    truth = {
        (n, x): (1.0 if x == n else (1.1 if x == 5 else 3.0))
        for n in range(1, 5)
        for x in range(1, 11)
    }
    truth[(4, 4)] = 0.5  # point 4's own best is far better than 5 there

    class Table(FixedModel):
        def predict_log(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            keys = zip(features[:, 0].astype(int), features[:, 1].astype(int), strict=True)
            return np.log([truth[k] for k in keys]), np.full(len(features), 0.01)

    measured = samples([("a", 1, 1.0), ("a", 5, 1.1)]).drop(columns="gpu").assign(n=[1, 1])
    evidence = Evidence(measured, sp, "time")
    score = EvidenceScore(evidence, Table({}, sd=0.01), sp)
    decisions = pd.DataFrame({"n": [1, 2, 3, 4], "x": [1, 2, 3, 4]})
    decisions["source"] = "surrogate"
    limited = limit_configurations(decisions, score, sp, 2)
    assert limited["x"].tolist() == [5, 5, 5, 4]
    assert limited["source"].tolist() == ["measured", "surrogate", "surrogate", "surrogate"]
    assert limit_configurations(decisions, score, sp, 4)["x"].tolist() == [1, 2, 3, 4]
    assert limit_configurations(decisions, score, sp, 1)["x"].tolist() == [5, 5, 5, 5]


class Members(FixedModel):
    """Bootstrap members' predictions (members x rows) given by a function of (n, x, member)."""

    def __init__(self, value, count: int = 5) -> None:  # type: ignore[no-untyped-def]
        super().__init__({}, sd=0.0)
        self.value, self.count = value, count

    def predict_members(self, features: np.ndarray) -> np.ndarray:
        n, x = features[:, 0].astype(int), features[:, 1].astype(int)
        return np.array(
            [[self.value(a, b, j) for a, b in zip(n, x, strict=True)] for j in range(self.count)]
        )


def portfolio_case(value, measured: pd.DataFrame | None = None) -> int:  # type: ignore[no-untyped-def]
    """:func:`portfolio_size` of 20 points decided among configurations 1 - 4, the members'
    predictions given by ``value`` (n, x, member), the samples ``measured`` (default: one
    cell that is never decided)."""
    sp = Space(
        [Parameter("n", "int", values=tuple(range(20)))],
        [Parameter("x", "int", values=(1, 2, 3, 4, 5))],
    )
    if measured is None:
        measured = samples([("a", 5, 1.0)]).drop(columns="gpu").assign(n=[0])
    evidence = Evidence(measured, sp, "time")
    score = EvidenceScore(evidence, Members(value), sp)
    decisions = pd.DataFrame({"n": range(20), "x": [1 + n % 4 for n in range(20)]})
    return portfolio_size(decisions, score, sp)


def test_portfolio_size_keeps_the_differences_every_draw_shows() -> None:
    """Configuration 1 is best below n = 10 and 2 above, by 30 %, in every member (with a
    little noise on 3 and 4, which are never best): two configurations."""
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.01, size=(5, 20, 5))

    def value(n: int, x: int, j: int) -> float:
        best = 1 if n < 10 else 2
        return (0.0 if x == best else 0.3) + (0.3 if x > 2 else 0.0) + noise[j, n, x]

    assert portfolio_case(value) == 2


def test_portfolio_size_merges_what_only_some_draws_show() -> None:
    """The four configurations are equal up to noise that differs from member to member (each
    draw of the samples puts another one first at each point): one configuration, in most
    draws of that noise (the rule is statistical: a lucky draw may keep two)."""
    sizes = []
    for seed in range(12):
        noise = np.random.default_rng(seed).normal(0, 0.05, size=(5, 20, 5))
        sizes.append(portfolio_case(lambda n, x, j, noise=noise: noise[j, n, x]))
    assert sizes.count(1) >= 8, sizes


def every_cell_measured(time, spread: float) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """Samples of configurations 1 - 4 at each of the 20 points, ``time(n, x)`` each, with
    repeats ``spread`` apart."""
    cells = [(n, x) for n in range(20) for x in range(1, 5)]
    table = samples([("a", x, time(n, x)) for n, x in cells], spread)
    return table.drop(columns="gpu").assign(n=[n for n, _ in cells])


def test_portfolio_size_keeps_a_difference_the_measurements_show() -> None:
    """Each point's decided configuration was measured 30 % faster than the three others
    (repeats 1 % apart); the members' predictions are pure noise, as when the models of the
    draws that left a point's cells out know nothing there: the four configurations stay."""
    noise = np.random.default_rng(0).normal(0, 0.05, size=(5, 20, 6))
    measured = every_cell_measured(lambda n, x: 1.0 if x == 1 + n % 4 else 1.3, 0.01)
    assert portfolio_case(lambda n, x, j: noise[j, n, x], measured) == 4


def test_portfolio_size_merges_measurements_within_their_noise() -> None:
    """Every cell measured at the same mean, each with a standard error of about 5 %: the
    measurements tell nothing apart, one configuration is enough."""
    measured = every_cell_measured(lambda n, x: 1.0, 0.07)
    assert portfolio_case(lambda n, x, j: 0.0, measured) == 1


def test_portfolio_size_keeps_every_configuration_of_categorical_inputs() -> None:
    """Values of a categorical input have their own measurements: the same noise as above
    merges nothing there."""
    sp = space()
    evidence = Evidence(samples([("a", 1, 1.0)]), sp, "time")
    noise = np.random.default_rng(1).normal(0, 0.05, size=(5, 2, 11))
    model = Members(lambda gpu, x, j: noise[j, gpu, x])
    decisions = pd.DataFrame({"gpu": ["a", "b"], "x": [1, 2]})
    assert portfolio_size(decisions, EvidenceScore(evidence, model, sp), sp) == 2


def paired_case(
    second: dict[int, float],
) -> tuple[pd.DataFrame, EvidenceScore, Space]:
    """20 points with configurations 1 and 2 both measured at each (repeats 1 % apart):
    1 at 1.0, 2 at ``second[n]`` (default 1.2 below n = 14, 1.0 from there); decided 1 below
    n = 14 and 2 from there.
    The members predict nothing apart."""
    sp = Space(
        [Parameter("n", "int", values=tuple(range(20)))],
        [Parameter("x", "int", values=(1, 2, 3))],
    )
    cells = [
        (n, x, 1.0 if x == 1 else second.get(n, 1.2 if n < 14 else 1.0))
        for n in range(20)
        for x in (1, 2)
    ]
    measured = samples([("a", x, t) for _, x, t in cells], 0.01)
    measured = measured.drop(columns="gpu").assign(n=[n for n, _, _ in cells])
    model = Members(lambda n, x, j: 0.0)
    model.mean_by_x, model.sd = {1: 0.0, 2: 0.0, 3: 0.0}, 0.05
    score = EvidenceScore(Evidence(measured, sp, "time"), model, sp)
    decisions = pd.DataFrame({"n": range(20), "x": [1 if n < 14 else 2 for n in range(20)]})
    return decisions, score, sp


def test_measured_loss_is_the_paired_measurements_of_the_rewritten_points() -> None:
    """Configuration 2, decided at n = 14 - 19, is rewritten to 1: the loss is what 1 was
    measured slower (or faster) than 2 at those points, over the 20 points; points where 2
    was not decided, or where one of the two was not measured, do not count."""
    decisions, score, sp = paired_case({17: 0.8, 18: 0.8})
    after = decisions.assign(x=1)
    assert measured_loss(decisions, after, score, sp) == pytest.approx(2 * np.log(1.25) / 20)
    assert measured_loss(decisions, decisions, score, sp) == 0.0
    decisions, score, sp = paired_case({15: 1.25, 17: 0.8, 18: 0.8, 3: 0.5})
    after = decisions.assign(x=1)
    assert measured_loss(decisions, after, score, sp) == pytest.approx(np.log(1.25) / 20)
    unmeasured = decisions.assign(x=[1] * 14 + [3] * 6)
    assert measured_loss(decisions, unmeasured, score, sp) == 0.0


def test_measured_loss_counts_a_measurement_traded_for_a_guess_where_the_budget_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Configuration 2, decided (and measured, as 1 was) at n = 14 - 19, is rewritten to 3,
    never measured anywhere. Where the confirmation's budget ended at those points
    (``only_measured_at``), the rewrite trades a measurement for a guess: it costs 3's
    pessimistic estimate (the model's error in quadrature) over 2's measurement there. Elsewhere
    it costs nothing measured; and a trade at one point alone is one draw of the noise."""
    monkeypatch.setattr(decisions_module, "STRICT_MIN_MEASURED", 2)
    decisions, score, sp = paired_case({})
    score.model_error = 0.5
    late = pd.DataFrame({"n": range(14, 20)})
    strict = score.only_measured_at(late)
    traded = decisions.assign(x=[1] * 14 + [3] * 6)
    assert measured_loss(decisions, traded, score, sp) == 0.0
    guess = strict.pessimistic(traded.iloc[14:])
    assert guess == pytest.approx(DECIDE_KAPPA * np.hypot(0.05, 0.5), rel=1e-6)
    measured = strict.evidence.lookup(decisions.iloc[14:])[0]  # 2's log-times there (0)
    assert measured_loss(decisions, traded, strict, sp) == pytest.approx(
        float(np.sum(guess - measured)) / 20
    )
    # the same trade where the budget ended at one of the six points only: one pair
    one = score.only_measured_at(pd.DataFrame({"n": [19]}))
    assert measured_loss(decisions, traded, one, sp) == 0.0


def test_measured_loss_needs_a_configuration_paired_at_two_points() -> None:
    """Configuration 2 measured twice as fast as 1 at n = 18 and 19: decided at 19 alone, its
    one pair is one draw of the noise and counts for nothing; decided at both, it counts."""
    _, score, sp = paired_case({18: 0.5, 19: 0.5})
    once = pd.DataFrame({"n": range(20), "x": [1] * 19 + [2]})
    twice = pd.DataFrame({"n": range(20), "x": [1] * 18 + [2, 2]})
    ones = once.assign(x=1)
    assert measured_loss(once, ones, score, sp) == 0.0
    assert measured_loss(twice, ones, score, sp) == pytest.approx(2 * np.log(2) / 20)


def test_auto_portfolio_grows_while_the_measurements_lose_more_than_the_rule_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The size rule says one configuration, within a loss of 0.02; 2 was measured 25 %
    faster than 1 at two of the points it was decided at (a loss of 0.022 over the 20
    points): the portfolio grows to keep it. At one point (0.011) it does not."""
    monkeypatch.setattr(portfolio_module, "size_and_tolerance", lambda *args: (1, 0.02))
    decisions, score, sp = paired_case({17: 0.8, 18: 0.8})
    assert limit_configurations(decisions, score, sp, 1)["x"].tolist() == [1] * 20
    assert auto_portfolio(decisions, score, sp)["x"].tolist() == decisions["x"].tolist()
    decisions, score, sp = paired_case({17: 0.8})
    assert auto_portfolio(decisions, score, sp)["x"].tolist() == [1] * 20


def test_auto_portfolio_stops_growing_at_the_first_size_the_measurements_accept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """30 points decided among 1 (n < 10), 2 (10 - 19) and 3 (from 20), every cell measured:
    2 was measured 20 % faster than 1 where it was decided, 3 the same as 1 where it was. The
    size rule says one configuration: dropping 2 loses 0.074 over the points, dropping 3
    nothing, so the portfolio grows to two and no further, as limit_configurations at two."""
    monkeypatch.setattr(portfolio_module, "size_and_tolerance", lambda *args: (1, 0.02))
    sp = Space(
        [Parameter("n", "int", values=tuple(range(30)))],
        [Parameter("x", "int", values=(1, 2, 3))],
    )
    fast = {2: range(10, 20), 3: range(20, 30)}
    cells = [
        (n, x, 1.0 if x == 1 else (0.8 if x == 2 else 1.0) if n in fast[x] else 1.2)
        for n in range(30)
        for x in (1, 2, 3)
    ]
    measured = samples([("a", x, t) for _, x, t in cells], 0.01)
    measured = measured.drop(columns="gpu").assign(n=[n for n, _, _ in cells])
    model = Members(lambda n, x, j: 0.0)
    model.mean_by_x, model.sd = {1: 0.0, 2: 0.0, 3: 0.0}, 0.05
    score = EvidenceScore(Evidence(measured, sp, "time"), model, sp)
    decisions = pd.DataFrame({"n": range(30), "x": [1 + n // 10 for n in range(30)]})
    grown = auto_portfolio(decisions, score, sp)
    assert grown["x"].tolist() == [1] * 10 + [2] * 10 + [1] * 10
    pd.testing.assert_frame_equal(grown, limit_configurations(decisions, score, sp, 2))


def test_a_configuration_measured_slow_nearby_is_not_predicted_fast_here() -> None:
    """The model predicts configuration 4 fastest everywhere, but it was measured 2x slower
    than predicted at n = 900: at n = 1,000 (close, in the inputs' log range) its estimate
    carries that residual and another configuration ships; at n = 20 (far) the model
    stands."""
    sp = Space(
        [Parameter("n", "int", low=10, high=10_000, log=True)],
        [Parameter("x", "int", values=tuple(range(1, 11)))],
    )
    evidence = Evidence(
        samples([("a", 4, 2.0), ("a", 5, 1.05)]).drop(columns="gpu").assign(n=[900, 50]), sp, "time"
    )

    class Flat(FixedModel):
        def predict_log(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            x = features[:, -1].astype(int)  # the design parameter, last
            return np.where(x == 4, np.log(0.9), 0.0), np.full(len(x), 0.01)

    score = EvidenceScore(evidence, Flat({}, sd=0.01), sp)
    grid = pd.DataFrame({"n": [1000, 20], "x": [4, 4], "predicted_time": [0.9, 0.9]})
    decided = decide(grid.assign(n_valid=10), score, sp, "time")
    assert decided["x"].iloc[0] != 4
    assert decided["x"].iloc[1] == 4
    mean, _, _, _ = score.estimate(pd.DataFrame({"n": [1000, 20], "x": [4, 4]}))
    assert np.exp(mean[0]) > 1.5  # 0.9 x (2.0 / 0.9) x weight close to 1
    assert np.exp(mean[1]) == pytest.approx(0.9)


def test_a_configuration_likely_to_fail_where_it_never_ran_is_ruled_out() -> None:
    """Configurations 8 - 10 fail at every n >= 11 they ran at (a resource limit) and are the
    fastest where they succeed: a model of the successes alone predicts 9 fastest everywhere.
    At n = 15, where 9 never ran, the failure classifier rules it out (decision 0041); at
    n = 3, where the large ones succeed, 9 stays the decision."""
    from mlkaps_gpu.surrogate import FailureClassifier

    sp = Space(
        [Parameter("n", "int", values=tuple(range(1, 21)))],
        [Parameter("x", "int", values=tuple(range(1, 11)))],
    )
    ok = [(n, x, 0.5 if x >= 8 else 1.0 + 0.1 * x) for n in range(1, 11) for x in (2, 8, 10)]
    ok += [(n, x, 1.0 + 0.1 * x) for n in range(11, 21) for x in (2, 5)]
    store = samples([("a", x, t) for _, x, t in ok]).drop(columns="gpu")
    store.insert(0, "n", [n for n, _, _ in ok])
    failed = pd.DataFrame(
        [(n, x) for n in (11, 12, 14, 16, 17, 19, 20) for x in (8, 10)], columns=["n", "x"]
    ).assign(time=np.nan, status="runtime_error", n_repeats=0, raw_times="[]")
    store = pd.concat([store, failed], ignore_index=True)
    evidence = Evidence(store, sp, "time")
    model = FixedModel({x: (np.log(0.4) if x == 9 else 0.1 * x) for x in range(1, 11)}, sd=0.01)
    classifier = FailureClassifier.fit_if_informative(
        sp.features(store[sp.names]), (store["status"] != "ok").to_numpy()
    )
    assert classifier is not None
    blind = EvidenceScore(evidence, model, sp)
    aware = EvidenceScore(evidence, model, sp, failures=classifier)
    point = pd.DataFrame({"n": [15], "x": [9], "predicted_time": [0.4], "n_valid": [10]})
    assert decide(point, blind, sp, "time")["x"].iloc[0] == 9
    decided = decide(point, aware, sp, "time")
    assert decided["x"].iloc[0] == 1  # the fastest the model predicts of those that run
    small = pd.DataFrame({"n": [3], "x": [9], "predicted_time": [0.4], "n_valid": [10]})
    assert decide(small, aware, sp, "time")["x"].iloc[0] == 9
    table = pd.DataFrame({"n": [15, 15, 3, 12], "x": [9, 2, 9, 8]})
    # measured there: a success is never ruled out, a failure always is
    assert aware.ruled_out(table).tolist() == [True, False, False, True]
    assert blind.ruled_out(table).tolist() == [False, False, False, True]
    assert aware.only_measured_at(point).failures is classifier


def test_a_configuration_that_failed_wherever_it_ran_with_a_categorical_value_is_ruled_out() -> (
    None
):
    """Configuration 9 is the fastest on GPU "a" and failed at both sizes it ran at on GPU
    "b" (a resource limit that depends on the GPU alone): at a size of "b" where it never ran
    it is ruled out, with or without a failure classifier (decision 0044); on "a" it stays
    the decision. Configuration 8 failed at one size of "b" and succeeded at another there:
    a failure that depends on the size, left to the classifier."""
    sp = Space(
        [
            Parameter("gpu", "categorical", values=GPUS),
            Parameter("n", "int", values=tuple(range(1, 21))),
        ],
        [Parameter("x", "int", values=tuple(range(1, 11)))],
    )
    ok = [("a", n, x, 0.5 if x == 9 else 1.0 + 0.1 * x) for n in range(1, 21, 2) for x in (2, 9)]
    ok += [("b", n, x, 1.0 + 0.1 * x) for n in range(1, 21, 2) for x in (2, 5)]
    ok += [("b", 3, 8, 0.7)]
    store = samples([(gpu, x, t) for gpu, _, x, t in ok])
    store.insert(1, "n", [n for _, n, _, _ in ok])
    failed = pd.DataFrame(
        [("b", 4, 9), ("b", 16, 9), ("b", 5, 8)], columns=["gpu", "n", "x"]
    ).assign(time=np.nan, status="runtime_error", n_repeats=0, raw_times="[]")
    store = pd.concat([store, failed], ignore_index=True)
    evidence = Evidence(store, sp, "time")
    assert evidence.failed_wherever_run.to_dict("records") == [{"x": 9, "gpu": "b"}]
    fast = {8: np.log(0.55), 9: np.log(0.5)}
    model = FixedModel({x: fast.get(x, 0.1 * x) for x in range(1, 11)}, 0.01)
    score = EvidenceScore(evidence, model, sp)
    table = pd.DataFrame(
        {"gpu": ["b", "b", "a", "b", "b"], "n": [10, 4, 10, 10, 3], "x": [9, 9, 9, 8, 8]}
    )
    assert score.ruled_out(table).tolist() == [True, True, False, False, False]
    points = pd.DataFrame(
        {"gpu": ["b", "a"], "n": [10, 10], "x": [9, 9], "predicted_time": [0.4, 0.4]}
    )
    decided = decide(points.assign(n_valid=10), score, sp, "time")
    assert decided["x"].tolist() == [8, 9]  # on "b": the fastest predicted of those that run


def test_each_row_is_estimated_once_and_the_same_whatever_table_holds_it() -> None:
    """The decisions, the portfolio and the trees' score ask for the same rows again in other
    tables (other orders, subsets, extra columns): each row is predicted once, and its estimate
    is the one a fresh score gives it alone."""
    sp = Space(
        [Parameter("n", "int", low=10, high=10_000, log=True)],
        [Parameter("x", "int", values=tuple(range(1, 11)))],
    )
    evidence = Evidence(
        samples([("a", 4, 2.0), ("a", 5, 1.05)]).drop(columns="gpu").assign(n=[900, 50]), sp, "time"
    )
    predicted: list[int] = []

    class Counting(FixedModel):
        def predict_log(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            predicted.append(len(features))
            x = features[:, -1].astype(int)  # the design parameter, last
            return np.log(x / 3.0), np.full(len(x), 0.1)

    score = EvidenceScore(evidence, Counting({}, sd=0.1), sp)
    first = pd.DataFrame({"n": [1000, 20, 900, 1000], "x": [4, 4, 4, 4]})
    score.estimate(first)
    rows_first = sum(predicted)
    assert rows_first <= 3 + 2  # three distinct rows (and the evidence's residuals once)
    second = pd.DataFrame({"x": [4, 7, 4], "n": [20, 20, 1000], "extra": [1, 2, 3]})
    mean, sd, seen, out = score.estimate(second)
    assert sum(predicted) == rows_first + 1  # only (20, 7) is new
    for row in range(len(second)):
        alone = EvidenceScore(evidence, Counting({}, sd=0.1), sp).estimate(second.iloc[[row]])
        assert mean[row] == alone[0][0] and sd[row] == alone[1][0]
        assert seen[row] == alone[2][0] and out[row] == alone[3][0]
