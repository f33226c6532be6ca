"""GridOptimizer against brute force, with analytic surrogates whose optimum is known."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.optimize import METHODS, GridOptimizer
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.surrogate import Surrogate

VARIANT_COST = np.array([2.0, 0.0, 1.0])  # slow, fast, mid


class Analytic(Surrogate):
    """A "model" that computes a known function of the feature columns (n, bx, by, variant)."""

    def __init__(self, function: Callable[[np.ndarray], np.ndarray]) -> None:
        self.function = function
        self.calls = 0

    def _fit(self, features: np.ndarray, target: np.ndarray) -> None:
        raise AssertionError("an analytic surrogate is not fitted")

    def _predict(self, features: np.ndarray) -> np.ndarray:
        self.calls += 1
        return self.function(features)


def time_model(features: np.ndarray) -> np.ndarray:
    """Best at bx = n / 4, by = 3, the 'fast' variant."""
    n, bx, by, variant = features.T
    return (bx - n / 4) ** 2 + (by - 3) ** 2 + VARIANT_COST[variant.astype(int)]


def energy_model(features: np.ndarray) -> np.ndarray:
    """Conflicts with time: small blocks and the 'slow' variant save energy."""
    _, bx, by, variant = features.T
    return bx * by / 4 + np.array([0.0, 3.0, 1.0])[variant.astype(int)]


def make_space(constraints: list[str] | None = None, enumerate_limit: int = 2_000_000) -> Space:
    return Space(
        [Parameter("n", "int", low=8, high=64)],
        [
            Parameter("bx", "int", values=tuple(range(1, 17))),
            Parameter("by", "int", low=1, high=8),
            Parameter("variant", "categorical", values=("slow", "fast", "mid")),
        ],
        ["bx * by <= n"] if constraints is None else constraints,
        enumerate_limit=enumerate_limit,
    )


def candidates_by_hand(space: Space, n: int) -> list[tuple[int, int, int]]:
    """(bx, by, variant index) of every configuration valid for input n, for 'bx * by <= n'."""
    return [
        (bx, by, v)
        for bx, by, v in itertools.product(range(1, 17), range(1, 9), range(3))
        if bx * by <= n
    ]


def features_of(n: int, candidates: list[tuple[int, int, int]]) -> np.ndarray:
    return np.array([[n, bx, by, v] for bx, by, v in candidates], dtype=float)


def brute_force_best(space: Space, n: int, model: Callable[[np.ndarray], np.ndarray]) -> float:
    candidates = candidates_by_hand(space, n)
    return float(model(features_of(n, candidates)).min())


def chosen_features(space: Space, optima: pd.DataFrame) -> np.ndarray:
    return space.features(optima, space.names)


# ------------------------------------------------------------------------------- exhaustive


def test_exhaustive_finds_the_exact_optimum() -> None:
    space = make_space()
    grid = space.grid(9)
    optima = GridOptimizer(space, method="exhaustive").run([Analytic(time_model)], grid)
    assert optima.attrs["method"] == "exhaustive"
    assert list(optima.columns) == [*space.names, "predicted_time", "n_valid"]
    pd.testing.assert_frame_equal(optima[space.input_names], grid)
    assert space.is_valid(optima).all()
    for index, n in enumerate(grid["n"]):
        best = brute_force_best(space, int(n), time_model)
        assert optima["predicted_time"].iloc[index] == best
        assert optima["n_valid"].iloc[index] == len(candidates_by_hand(space, int(n)))
    # the reported value is the objective of the reported configuration
    np.testing.assert_array_equal(
        time_model(chosen_features(space, optima)), optima["predicted_time"].to_numpy()
    )
    assert (optima["variant"] == "fast").all()
    assert (optima["by"] == 3).all()


def test_maximize_direction() -> None:
    space = make_space()
    grid = space.grid(5)
    surrogate = Analytic(lambda f: -time_model(f))  # maximising -time is minimising time
    optima = GridOptimizer(space, directions=["maximize"], method="exhaustive").run(
        [surrogate], grid
    )
    for index, n in enumerate(grid["n"]):
        best = -brute_force_best(space, int(n), time_model)
        assert optima["predicted_time"].iloc[index] == best
    largest = GridOptimizer(space, directions=["maximize"], method="exhaustive").run(
        [Analytic(time_model)], grid
    )
    for index, n in enumerate(grid["n"]):
        candidates = candidates_by_hand(space, int(n))
        worst = float(time_model(features_of(int(n), candidates)).max())
        assert largest["predicted_time"].iloc[index] == worst


def weighted_choice(n: int, space: Space, weights: tuple[float, float]) -> tuple[int, int, int]:
    """The documented rule: min-max normalise each objective over the valid set, weight, sum."""
    candidates = candidates_by_hand(space, n)
    values = np.column_stack(
        [time_model(features_of(n, candidates)), energy_model(features_of(n, candidates))]
    )
    low, high = values.min(axis=0), values.max(axis=0)
    score = ((values - low) / np.where(high > low, high - low, 1.0)) @ np.array(weights)
    return candidates[int(np.argmin(score))]


@pytest.mark.parametrize("weights", [(1.0, 0.0), (0.0, 1.0), (0.5, 0.5), (0.8, 0.2)])
def test_two_objectives_with_weights(weights: tuple[float, float]) -> None:
    space = make_space()
    grid = space.grid(4)
    optimizer = GridOptimizer(
        space, objectives=["time", "energy"], method="exhaustive", weights=weights
    )
    optima = optimizer.run([Analytic(time_model), Analytic(energy_model)], grid)
    features = chosen_features(space, optima)
    np.testing.assert_array_equal(optima["predicted_time"], time_model(features))
    np.testing.assert_array_equal(optima["predicted_energy"], energy_model(features))
    for index, n in enumerate(grid["n"]):
        bx, by, variant = weighted_choice(int(n), space, weights)
        chosen = optima.iloc[index]
        assert (chosen["bx"], chosen["by"], chosen["variant"]) == (
            bx,
            by,
            ("slow", "fast", "mid")[variant],
        )


def test_weights_change_the_choice() -> None:
    space = make_space()
    grid = space.grid(3)
    surrogates = [Analytic(time_model), Analytic(energy_model)]
    fast = GridOptimizer(space, objectives=["time", "energy"], method="exhaustive", weights=[1, 0])
    frugal = GridOptimizer(
        space, objectives=["time", "energy"], method="exhaustive", weights=[0, 1]
    )
    by_time, by_energy = fast.run(surrogates, grid), frugal.run(surrogates, grid)
    assert (by_time["predicted_time"] <= by_energy["predicted_time"]).all()
    assert (by_energy["predicted_energy"] <= by_time["predicted_energy"]).all()
    assert (by_energy["predicted_energy"] < by_time["predicted_energy"]).any()


@pytest.mark.parametrize("method", ["exhaustive", "nsga2"])
def test_point_without_valid_configuration_has_n_valid_zero(method: str) -> None:
    space = make_space(["bx * by <= n - 20"])  # nothing for n < 21
    grid = pd.DataFrame({"n": [8, 15, 50]})
    optima = GridOptimizer(space, method=method, population=10, generations=3, seed=0).run(  # type: ignore[arg-type]
        [Analytic(time_model)], grid
    )
    assert optima["n_valid"].tolist()[:2] == [0, 0]
    assert np.isnan(optima["predicted_time"].iloc[:2]).all()
    assert (
        optima["n_valid"].iloc[2]
        == sum(bx * by <= 30 for bx, by in itertools.product(range(1, 17), range(1, 9))) * 3
    )
    assert space.is_valid(optima.iloc[[2]]).all()


def test_auto_picks_exhaustive_for_small_valid_sets() -> None:
    space = make_space()
    grid = space.grid(3)
    optimizer = GridOptimizer(space, method="auto", population=40, generations=40)
    assert optimizer.chosen_method(grid) == "exhaustive"
    tiny_ga = GridOptimizer(space, method="auto", population=4, generations=2)
    assert tiny_ga.chosen_method(grid) == "nsga2"  # 300 valid > 4 * 4 * 3 evaluations
    assert GridOptimizer(make_space(enumerate_limit=1)).chosen_method(grid) == "nsga2"
    assert set(METHODS) == {"auto", "nsga2", "exhaustive"}


def test_predictions_are_batched() -> None:
    space = make_space()
    surrogate = Analytic(time_model)
    GridOptimizer(space, method="exhaustive").run([surrogate], space.grid(9))
    assert surrogate.calls == 1  # one prediction for the whole grid, not one per point


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"method": "annealing"}, "unknown optimization method"),
        ({"directions": ["fastest"]}, "unknown directions"),
        ({"directions": ["minimize", "maximize"]}, "2 directions for 1"),
        ({"objectives": ["time", "energy"], "weights": [1.0]}, "1 weights for 2"),
    ],
)
def test_bad_options_are_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GridOptimizer(make_space(), **arguments)  # type: ignore[arg-type]


def test_one_surrogate_per_objective() -> None:
    optimizer = GridOptimizer(make_space(), objectives=["time", "energy"])
    with pytest.raises(ValueError, match="one surrogate per objective"):
        optimizer.run([Analytic(time_model)], make_space().grid(2))


# ------------------------------------------------------------------------------------ nsga2


def check_nsga2_quality(space: Space, optima: pd.DataFrame, grid: pd.DataFrame) -> None:
    assert optima.attrs["method"] == "nsga2"
    # every configuration is valid for its own input point (the constraint involves n)
    assert space.is_valid(optima).all()
    assert (optima["bx"] * optima["by"] <= optima["n"]).all()
    np.testing.assert_array_equal(
        time_model(chosen_features(space, optima)), optima["predicted_time"].to_numpy()
    )
    gaps = [
        optima["predicted_time"].iloc[i] - brute_force_best(space, int(n), time_model)
        for i, n in enumerate(grid["n"])
    ]
    assert min(gaps) >= 0
    assert sum(gap <= 1.0 for gap in gaps) >= 0.75 * len(gaps), gaps


def test_nsga2_is_near_optimal_and_valid() -> None:
    space = make_space()
    grid = space.grid(9)
    optimizer = GridOptimizer(space, method="nsga2", population=20, generations=15, seed=1)
    optima = optimizer.run([Analytic(time_model)], grid)
    check_nsga2_quality(space, optima, grid)


def test_nsga2_on_a_space_that_is_not_enumerated() -> None:
    space = make_space(enumerate_limit=1)
    grid = pd.DataFrame({"n": [12, 40]})
    optimizer = GridOptimizer(space, method="nsga2", population=20, generations=10, seed=2)
    optima = optimizer.run([Analytic(time_model)], grid)
    check_nsga2_quality(space, optima, grid)
    assert (optima["n_valid"] == -1).all()  # unknown count, at least one valid


def test_nsga2_small_valid_sets_are_solved_exactly() -> None:
    space = make_space(["bx * by <= n - 50"])  # n = 56: bx * by <= 6 -> 14 pairs x 3 variants
    grid = pd.DataFrame({"n": [56]})
    optima = GridOptimizer(space, method="nsga2", population=50, generations=5).run(
        [Analytic(time_model)], grid
    )
    best = min(
        (bx - 14) ** 2 + (by - 3) ** 2 + VARIANT_COST[v]
        for bx, by, v in itertools.product(range(1, 17), range(1, 9), range(3))
        if bx * by <= 6
    )
    assert optima["predicted_time"].iloc[0] == best
    assert optima["n_valid"].iloc[0] == 42


def test_nsga2_two_objectives_uses_the_weighted_rule() -> None:
    space = make_space()
    grid = pd.DataFrame({"n": [24, 48]})
    surrogates = [Analytic(time_model), Analytic(energy_model)]
    common = {"objectives": ["time", "energy"], "population": 20, "generations": 30, "seed": 4}
    by_time = GridOptimizer(space, method="nsga2", weights=[1, 0], **common).run(surrogates, grid)  # type: ignore[arg-type]
    by_energy = GridOptimizer(space, method="nsga2", weights=[0, 1], **common).run(  # type: ignore[arg-type]
        surrogates, grid
    )
    assert space.is_valid(by_time).all() and space.is_valid(by_energy).all()
    assert (by_time["predicted_time"] < by_energy["predicted_time"]).all()
    assert (by_energy["predicted_energy"] < by_time["predicted_energy"]).all()
    for index, n in enumerate(grid["n"]):
        # the energy-only choice is the global energy minimum (bx = by = 1, 'slow'): 0.25
        assert by_energy["predicted_energy"].iloc[index] == pytest.approx(0.25)
        assert (
            by_time["predicted_time"].iloc[index] <= brute_force_best(space, int(n), time_model) + 1
        )


def weighted_score(n: int, space: Space, chosen: pd.Series, weights: tuple[float, float]) -> float:
    """Normalised weighted score of one configuration over the valid set of n, and its minimum
    is 0 only for the exact weighted choice; objectives: 1000 x time and energy."""
    candidates = candidates_by_hand(space, n)
    features = features_of(n, candidates)
    values = np.column_stack([1000 * time_model(features), energy_model(features)])
    low, high = values.min(axis=0), values.max(axis=0)
    variant = ("slow", "fast", "mid").index(chosen["variant"])
    mine = features_of(n, [(int(chosen["bx"]), int(chosen["by"]), variant)])
    point = np.array([1000 * time_model(mine)[0], energy_model(mine)[0]])
    score = ((values - low) / (high - low)) @ np.array(weights)
    return float(((point - low) / (high - low)) @ np.array(weights) - score.min())


def test_nsga2_weights_apply_to_normalised_objectives() -> None:
    # objectives on very different scales: the weights must act on normalised values, as in
    # the exhaustive method, not on raw ones (where time would swamp energy)
    space = make_space()
    grid = pd.DataFrame({"n": [24, 48, 64]})
    surrogates = [Analytic(lambda f: 1000 * time_model(f)), Analytic(energy_model)]
    weights = (0.5, 0.5)
    optimizer = GridOptimizer(
        space,
        objectives=["time", "energy"],
        weights=weights,
        method="nsga2",
        population=20,
        generations=10,
        seed=3,
    )
    optima = optimizer.run(surrogates, grid)
    for index, n in enumerate(grid["n"]):
        assert weighted_score(int(n), space, optima.iloc[index], weights) < 0.05


def test_nsga2_same_seed_same_result() -> None:
    space = make_space()
    grid = pd.DataFrame({"n": [20, 60]})

    def run(seed: int) -> pd.DataFrame:
        optimizer = GridOptimizer(space, method="nsga2", population=20, generations=6, seed=seed)
        return optimizer.run([Analytic(lambda f: time_model(f) + 0.01 * f[:, 1])], grid)

    pd.testing.assert_frame_equal(run(7), run(7))


def test_progress_is_reported() -> None:
    calls: list[tuple[int, int]] = []
    space = make_space()
    optimizer = GridOptimizer(
        space, method="exhaustive", progress=lambda d, t: calls.append((d, t))
    )
    grid = space.grid(3)  # 3 values of n and a break of "bx * by <= n"
    optimizer.run([Analytic(time_model)], grid)
    assert len(grid) == 5 and calls[-1] == (5, 5)
