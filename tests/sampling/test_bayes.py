"""What distinguishes the Bayesian sampler: contexts, acquisitions, portfolio, failures."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.sampling import BayesianSampler, GAAdaptiveSampler, RandomSampler, Sampler
from mlkaps_gpu.sampling._bayes import _EnsembleModel, model_features
from mlkaps_gpu.space import Parameter, Space

TARGET = {"a": 5, "b": 22}


def valley() -> Space:
    """A categorical input and one design axis: the best ``tile`` depends on the input."""
    return Space(
        [Parameter("gpu", "categorical", values=("a", "b"))],
        [Parameter("tile", "int", values=tuple(range(30))), Parameter("flag", "bool")],
    )


def valley_time(rows: pd.DataFrame) -> np.ndarray:
    best = rows["gpu"].map(TARGET).to_numpy()
    scale = np.where(rows["gpu"] == "a", 1.0, 50.0)  # one input is 50 times slower
    return scale * (1.0 + 0.05 * (rows["tile"].to_numpy() - best) ** 2 + 0.3 * rows["flag"])


def run(sampler: Sampler, batches: list[int], measure: Any = None) -> pd.DataFrame:
    for size in batches:
        rows = sampler.ask(size)
        results = (
            measure(rows) if measure else pd.DataFrame({"time": valley_time(rows), "status": "ok"})
        )
        sampler.tell(rows, results)
    return sampler.history_


def regret(history: pd.DataFrame) -> float:
    """Mean over inputs of best measured time / optimum - 1."""
    ratios = []
    for gpu, best in TARGET.items():
        here = history[history["gpu"] == gpu]
        optimum = 1.0 if gpu == "a" else 50.0
        ratios.append(here["time"].min() / optimum - 1.0 if len(here) else np.inf)
        assert best >= 0
    return float(np.mean(ratios))


def test_model_features_put_categories_one_apart() -> None:
    space = Space(
        [Parameter("gpu", "categorical", values=("a", "b", "c"))],
        [Parameter("tile", "int", values=(1, 2, 4, 8))],
    )
    table = pd.DataFrame({"gpu": ["a", "b", "c"], "tile": [1, 4, 8]})
    features = model_features(space, table)
    assert features.shape == (3, 4)
    distances = np.linalg.norm(features[:, :3][:, None] - features[:, :3][None], axis=2)
    np.testing.assert_allclose(distances[np.triu_indices(3, 1)], 1.0)
    np.testing.assert_allclose(features[:, 3], [0.125, 0.625, 0.875])


@pytest.mark.parametrize("acquisition", ["ei", "lcb", "advanced_multi"])
def test_finds_each_inputs_optimum_faster_than_random(acquisition: str) -> None:
    batches = [20, 10, 10]
    bayes = run(BayesianSampler(valley(), seed=0, acquisition=acquisition), batches)  # type: ignore[arg-type]
    random = [regret(run(RandomSampler(valley(), seed=s), batches)) for s in range(3)]
    assert regret(bayes) < 0.02
    assert regret(bayes) < min(random)


def test_contexts_share_the_batch_although_one_input_is_much_slower() -> None:
    sampler = BayesianSampler(valley(), seed=1, acquisition="ei")
    history = run(sampler, [20, 20, 20])
    # without per-context incumbents the fast input would take (nearly) every row
    assert (history.iloc[20:]["gpu"] == "b").mean() > 0.2


def test_maximisation() -> None:
    def measure(rows: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({"gflops": 1000.0 / valley_time(rows), "status": "ok"})

    sampler = BayesianSampler(valley(), seed=2, objective="gflops", maximize=True)
    history = run(sampler, [20, 10, 10], measure)
    best_a = history[history["gpu"] == "a"].sort_values("gflops").iloc[-1]
    assert abs(int(best_a["tile"]) - TARGET["a"]) <= 1


def test_failed_measurements_are_left_out_of_the_model() -> None:
    seen_targets: list[int] = []

    class Spy(BayesianSampler):
        def _model(self, candidates: Any, points: Any, targets: Any, *, seed: int) -> Any:
            seen_targets.append(len(targets))
            assert np.isfinite(targets).all()
            return super()._model(candidates, points, targets, seed=seed)

    def measure(rows: pd.DataFrame) -> pd.DataFrame:
        failed = (rows["tile"] % 3 == 0).to_numpy()
        time = np.where(failed, np.nan, valley_time(rows))
        return pd.DataFrame({"time": time, "status": np.where(failed, "runtime_error", "ok")})

    sampler = Spy(valley(), seed=3)
    history = run(sampler, [30, 10, 10], measure)
    ok_counts = np.cumsum([(history.iloc[:k]["status"] == "ok").sum() for k in (30, 40)])
    assert seen_targets == [int(ok_counts[0]), int((history.iloc[:40]["status"] == "ok").sum())]
    keys = valley().key(history)
    assert len(keys) == len(set(keys))  # failed rows are not proposed again either


def test_incumbent_of_a_context_is_its_best_measurement_or_predicted_mean() -> None:
    space = valley()
    sampler = BayesianSampler(space, seed=0)
    pool = pd.DataFrame({"gpu": ["a", "a", "b", "b"], "tile": [1, 2, 3, 4], "flag": False})
    mean = np.array([0.5, 0.7, 3.0, 2.0])
    measured = pd.DataFrame({"gpu": ["a", "b", "b"], "tile": [9, 9, 8], "flag": False})
    groups, incumbents = sampler._incumbents(pool, mean, measured, np.array([0.2, 4.0, 2.5]))
    assert groups.tolist() == [0, 0, 1, 1]
    np.testing.assert_allclose(incumbents, [0.2, 2.0])


class _FakeModel:
    def __init__(self, std: float) -> None:
        self.std_ = np.full(4, std)


def test_contextual_exploration_shrinks_with_certainty_and_improvement() -> None:
    sampler = BayesianSampler(valley(), seed=0, log_target=True)
    sampler._initial_mean = 1.0
    first = sampler._exploration(_FakeModel(0.4), np.array([1.0, 1.0]))  # type: ignore[arg-type]
    assert first == pytest.approx(1.0)
    assert sampler._exploration(_FakeModel(0.2), np.array([1.0, 1.0])) == pytest.approx(0.5)  # type: ignore[arg-type]
    improved = sampler._exploration(_FakeModel(0.4), np.array([0.0, 0.0]))  # type: ignore[arg-type]
    assert improved == pytest.approx(np.exp(-1.0))


def close_rounds(sampler: BayesianSampler, scores: dict[str, float], rounds: int) -> None:
    for _ in range(rounds):
        kinds = [sampler.single_] if sampler.single_ else list(sampler.active_)
        sampler._close_round(
            {"scores": {k: scores[k] for k in kinds}, "duplicates": [], "nominated": kinds}
        )


def test_advanced_multi_drops_a_consistently_worse_acquisition() -> None:
    sampler = BayesianSampler(valley(), seed=0, acquisition="advanced_multi")
    close_rounds(sampler, {"ei": 1.0, "pi": 1.0, "lcb": 2.0}, 4)
    assert sampler.active_ == ["ei", "pi", "lcb"]
    close_rounds(sampler, {"ei": 1.0, "pi": 1.0, "lcb": 2.0}, 1)
    assert sampler.active_ == ["ei", "pi"] and sampler.single_ is None


def test_advanced_multi_keeps_a_consistently_better_acquisition_alone() -> None:
    sampler = BayesianSampler(valley(), seed=0, acquisition="advanced_multi")
    close_rounds(sampler, {"ei": 1.0, "pi": 1.25, "lcb": 1.25}, 4)
    assert sampler.single_ is None
    close_rounds(sampler, {"ei": 1.0, "pi": 1.25, "lcb": 1.25}, 1)
    assert sampler.single_ == "ei"


def test_multi_skips_acquisitions_that_keep_nominating_duplicates() -> None:
    sampler = BayesianSampler(valley(), seed=0, acquisition="multi")
    for _ in range(5):
        sampler._close_round(
            {
                "scores": {"ei": 1.0, "lcb": 3.0},
                "duplicates": [("pi", "ei")],  # pi nominated ei's candidate
                "nominated": ["ei", "lcb"],
            }
        )
    # ei and pi both took part in a duplicate 5 times: the better-scoring ei stays
    assert sampler.active_ == ["ei", "lcb"]


def test_portfolio_rounds_complete_when_their_rows_are_told() -> None:
    sampler = BayesianSampler(valley(), seed=4, acquisition="advanced_multi")
    run(sampler, [20, 12])
    assert sampler._rounds == {} and sampler._pending == {}
    assert all(len(scores) == 4 for scores in sampler._scores.values())  # 12 rows, 3 per round


def test_ensemble_replaces_the_gp_beyond_the_limit() -> None:
    models: list[Any] = []

    class Spy(BayesianSampler):
        def _model(self, candidates: Any, points: Any, targets: Any, *, seed: int) -> Any:
            models.append(super()._model(candidates, points, targets, seed=seed))
            return models[-1]

    sampler = Spy(valley(), seed=5, gp_limit=15, ensemble_members=3)
    history = run(sampler, [20, 10])
    assert isinstance(models[-1], _EnsembleModel)
    assert (models[-1].std_ > 0).any()
    assert valley().is_valid(history).all()


def test_ga_adaptive_accepts_bayes_as_sub_sampler() -> None:
    sampler = GAAdaptiveSampler(valley(), seed=0, budget=60, sub_sampler="bayes")
    assert isinstance(sampler.sub_sampler, BayesianSampler)
    history = run(sampler, [20, 20])
    assert len(sampler.sub_sampler.history_) == len(history) == 40


def test_rejects_unknown_acquisition() -> None:
    with pytest.raises(ValueError, match="advanced_multi"):
        BayesianSampler(valley(), acquisition="ucb")  # type: ignore[arg-type]


def test_restore_resumes_exactly_where_an_uninterrupted_run_would_be() -> None:
    whole = BayesianSampler(valley(), seed=6, acquisition="advanced_multi")
    history = run(whole, [20, 12, 12])
    batches = np.repeat([0, 1, 2], [20, 12, 12])
    results = history[["time", "status"]].assign(batch=batches)
    resumed = BayesianSampler(valley(), seed=6, acquisition="advanced_multi")
    resumed.restore(history[valley().names], results, asks=3)
    assert resumed._scores == whole._scores and resumed.active_ == whole.active_
    pd.testing.assert_frame_equal(resumed.ask(12), whole.ask(12))
    # without batch numbers the history is told at once: still valid, new rows
    plain = BayesianSampler(valley(), seed=6)
    plain.restore(history[valley().names], history[["time", "status"]], asks=3)
    assert not set(valley().key(plain.ask(12))) & set(valley().key(history))
