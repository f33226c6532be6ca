"""Where the exploitation points outnumber a batch's rows, GA-Adaptive measures ``contrast``
configurations at each of fewer points, so that the model sees differences between
configurations at one input (decision 0027); where every point gets a row, nothing changes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.sampling import ExploitSettings, GAAdaptiveSampler
from mlkaps_gpu.sampling._ga_adaptive import _spread
from mlkaps_gpu.space import Parameter, Space


def measure(rows: pd.DataFrame) -> pd.DataFrame:
    """Tile 4 is best below n = 256, tile 16 above."""
    best = np.where(rows["n"].to_numpy() < 256, 4, 16)
    time = rows["n"].to_numpy() * (1.0 + 0.05 * np.abs(rows["tile"].to_numpy() - best))
    return pd.DataFrame({"time": time, "status": "ok"})


def exploited_rows(contrast: int, grid: pd.DataFrame | None) -> pd.DataFrame:
    space = Space(
        [Parameter("n", "int", low=16, high=4096)],
        [Parameter("tile", "int", values=(1, 2, 4, 8, 16, 32))],
    )
    sampler = GAAdaptiveSampler(
        space,
        seed=0,
        budget=200,
        points=grid,
        exploit=ExploitSettings(contrast=contrast),
    )
    rows = sampler.ask(40)  # the bootstrap (LHS)
    sampler.tell(rows, measure(rows))
    return sampler.ask(10)  # exploitation


@pytest.mark.parametrize("grid", [None, pd.DataFrame({"n": np.geomspace(16, 4096, 64).round()})])
def test_points_that_outnumber_the_batch_get_two_configurations_each(
    grid: pd.DataFrame | None,
) -> None:
    paired = exploited_rows(2, grid)
    assert len(paired) == 10
    per_point = paired.groupby("n")["tile"].nunique()
    assert len(per_point) == 5 and (per_point == 2).all()
    single = exploited_rows(1, grid)
    assert single["n"].nunique() == 10


def test_spread_is_even_where_every_point_gets_a_row() -> None:
    rng = np.random.default_rng(0)
    counts = _spread(14, 4, 2, rng)
    assert counts.sum() == 14 and set(counts) <= {3, 4}
    counts = _spread(7, 100, 2, rng)
    assert counts.sum() == 7 and sorted(counts[counts > 0]) == [1, 2, 2, 2]
    counts = _spread(7, 3, 4, rng)  # fewer points than a contrast needs: every point
    assert counts.sum() == 7 and (counts >= 2).all()


def test_one_row_per_point_is_the_spread_of_before() -> None:
    """``contrast = 1`` draws the same points from the same generator as before it existed."""
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    counts = _spread(9, 50, 1, a)
    before = np.zeros(50, dtype=np.int64)
    before[b.choice(50, 9, replace=False)] += 1
    assert (counts == before).all()


def test_contrast_must_be_positive() -> None:
    with pytest.raises(ValueError, match="contrast"):
        ExploitSettings(contrast=0)


def test_inputs_of_a_few_values_keep_one_row_per_point() -> None:
    """Five GPUs are each revisited batch after batch: a batch of two goes to two of them."""
    space = Space(
        [Parameter("gpu", "categorical", values=("a", "b", "c", "d", "e"))],
        [Parameter("tile", "int", values=(1, 2, 4, 8, 16, 32))],
    )
    sampler = GAAdaptiveSampler(space, seed=0, budget=100)
    rows = sampler.ask(20)
    time = 1.0 + 0.05 * np.abs(rows["tile"].to_numpy() - 8)
    sampler.tell(rows, pd.DataFrame({"time": time, "status": "ok"}))
    assert sampler.ask(2)["gpu"].nunique() == 2


def test_the_bootstrap_is_shorter_where_inputs_take_many_values() -> None:
    """LHS explores 5 % of the budget before exploitation where the inputs take many values
    (exploitation's contrasts at random points explore them), 20 % where they take a few
    (decision 0030); an explicit share is kept."""
    design = [Parameter("tile", "int", values=(1, 2, 4, 8, 16, 32))]
    sizes = Space([Parameter("n", "int", low=16, high=4096)], design)
    gpus = Space([Parameter("gpu", "categorical", values=("a", "b", "c"))], design)
    many = GAAdaptiveSampler(sizes, seed=0, budget=200)
    few = GAAdaptiveSampler(gpus, seed=0, budget=200)
    assert (many.bootstrap, few.bootstrap) == (0.05, 0.2)
    assert GAAdaptiveSampler(sizes, seed=0, budget=200, bootstrap=0.3).bootstrap == 0.3
    rows = many.ask(10)
    many.tell(rows, measure(rows))
    assert many.eps() == 1.0  # exploitation from the second batch on
    rows = few.ask(10)
    few.tell(rows, pd.DataFrame({"time": 1.0 + rows["tile"].to_numpy(), "status": "ok"}))
    assert few.eps() == 0.0


def exploited_with(space: Space, spread_kappa: float, budget: int) -> pd.DataFrame:
    sampler = GAAdaptiveSampler(
        space, seed=0, budget=budget, exploit=ExploitSettings(spread_kappa=spread_kappa)
    )
    rows = sampler.ask(40)
    sampler.tell(rows, measure(rows))
    return sampler.ask(20)


def test_the_exploration_weight_is_held_where_inputs_take_many_values() -> None:
    """On inputs of many values the evaluations left per point are a fraction of one from the
    start, which would shrink ``kappa`` to nothing: ``spread_kappa`` holds it there (decision
    0032), and leaves inputs of a few values to the schedule."""
    design = [Parameter("tile", "int", values=(1, 2, 4, 8, 16, 32, 64, 128))]
    sizes = Space([Parameter("n", "int", low=16, high=4096)], design)
    held = ExploitSettings(spread_kappa=0.5)
    assert held.kappa_at(0.01, spread=True) == 0.5 and held.kappa_at(0.01) < 0.001
    # the same seed, the same measurements: only the held weight differs
    exploit, explore = exploited_with(sizes, 0.0, 200), exploited_with(sizes, 50.0, 200)
    assert not exploit.reset_index(drop=True).equals(explore.reset_index(drop=True))
    sizes_few = Space([Parameter("n", "int", values=(64, 256, 1024))], design)
    assert exploited_with(sizes_few, 0.0, 400).equals(exploited_with(sizes_few, 50.0, 400))
    with pytest.raises(ValueError, match="spread_kappa"):
        ExploitSettings(spread_kappa=-1.0)


def proposals_with_coverage(
    coverage: int, tried_large: int, pair_coverage: int = 0, orders: tuple[str, ...] = ("a",)
) -> pd.DataFrame:
    """Exploitation on inputs of many values where tile 1024 is valid only for n >= 1024 and
    the measurements hold it ``tried_large`` times, with order "a" (the rest never tried it;
    every other tile is measured with each of ``orders``)."""

    space = Space(
        [Parameter("n", "int", low=16, high=4096, log=True)],
        [
            Parameter("tile", "int", values=(1, 2, 4, 8, 16, 32, 1024)),
            Parameter("order", "categorical", values=orders),
        ],
        ["tile <= n"],
    )
    rng = np.random.default_rng(0)
    n = np.round(np.geomspace(16, 4096, 30)).astype(int)
    rows = pd.DataFrame({"n": np.repeat(n, 2), "tile": rng.choice([1, 2, 4, 8, 16, 32], 60)})
    rows = pd.concat([rows.assign(order=order) for order in orders], ignore_index=True)
    large = pd.DataFrame({"n": [2048, 4096, 1024, 3000][:tried_large], "tile": 1024, "order": "a"})
    rows = pd.concat([rows, large], ignore_index=True).drop_duplicates(ignore_index=True)
    measured = rows.assign(time=measure(rows)["time"].to_numpy())
    settings = ExploitSettings(coverage=coverage, pair_coverage=pair_coverage)
    points = pd.DataFrame({"n": np.round(np.geomspace(20, 4000, 12)).astype(int)})
    return spread_proposals(space, measured, points, settings)


def spread_proposals(
    space: Space, measured: pd.DataFrame, points: pd.DataFrame, settings: ExploitSettings
) -> pd.DataFrame:
    """Two proposals at each of ``points``, where inputs take many values (``spread``), from
    an ensemble fitted on ``measured`` (every row of it seen)."""
    from mlkaps_gpu.sampling import Exploiter
    from mlkaps_gpu.surrogate import BootstrapEnsemble

    model = BootstrapEnsemble(seed=0).fit(space.features(measured), measured["time"].to_numpy())
    return Exploiter(space, settings=settings).propose(
        model,
        measured,
        points,
        np.full(len(points), 2),
        space.key(measured[space.names]),
        np.random.default_rng(1),
        spread=True,
    )


def test_a_design_value_hardly_tried_is_tried_where_it_is_valid() -> None:
    """Where inputs take many values, a design value that fewer than ``coverage`` rows hold
    (a tile valid only at large sizes, which the model sees nowhere and extrapolates from the
    others) is a point's second pick where it is valid, until ``coverage`` rows hold it."""
    covered = proposals_with_coverage(2, 0)
    assert (covered["tile"] == 1024).any()
    assert (covered.loc[covered["tile"] == 1024, "n"] >= 1024).all()
    assert not (proposals_with_coverage(0, 0)["tile"] == 1024).any()
    assert not (proposals_with_coverage(2, 2)["tile"] == 1024).any()
    with pytest.raises(ValueError, match="coverage"):
        ExploitSettings(coverage=-1)


def test_a_pair_of_values_hardly_tried_is_tried_where_it_is_valid() -> None:
    """Tile 1024 measured four times, always with order "a": with ``pair_coverage`` 2 a point
    where it is valid gets (1024, "b") as its second pick; without, it never comes."""
    paired = proposals_with_coverage(4, 4, pair_coverage=2, orders=("a", "b"))
    large_b = (paired["tile"] == 1024) & (paired["order"] == "b")
    assert large_b.any() and (paired.loc[large_b, "n"] >= 1024).all()
    alone = proposals_with_coverage(4, 4, pair_coverage=0, orders=("a", "b"))
    assert not ((alone["tile"] == 1024) & (alone["order"] == "b")).any()
    with pytest.raises(ValueError, match="pair_coverage"):
        ExploitSettings(pair_coverage=-1)


def proposals_at_the_end(edge_coverage: int) -> pd.DataFrame:
    """Exploitation where order "b" is 1.2 times slower than "a" everywhere but at the range's
    end n = 256, where it is 3 times faster (a power-of-two stride), and the measurements hold
    "b" only inside the range."""

    space = Space(
        [Parameter("n", "int", low=16, high=256, log=True)],
        [
            Parameter("tile", "int", values=(4, 8, 16, 32, 64)),
            Parameter("order", "categorical", values=("a", "b")),
        ],
    )
    rng = np.random.default_rng(0)
    inside = pd.DataFrame(
        {
            "n": rng.integers(16, 250, 60),
            "tile": rng.choice([4, 8, 16, 32, 64], 60),
            "order": rng.choice(["a", "b"], 60),
        }
    )
    end = pd.DataFrame({"n": 256, "tile": [4, 16], "order": "a"})
    rows = pd.concat([inside, end], ignore_index=True).drop_duplicates(ignore_index=True)
    fast = (rows["n"] == 256) & (rows["order"] == "b")
    slow = (rows["n"] < 256) & (rows["order"] == "b")
    time = rows["n"].to_numpy() * np.where(fast, 1 / 3, np.where(slow, 1.2, 1.0))
    measured = rows.assign(time=time)
    points = pd.DataFrame({"n": [40, 100, 256]})
    return spread_proposals(space, measured, points, ExploitSettings(edge_coverage=edge_coverage))


def test_a_design_value_never_tried_at_an_end_of_the_range_is_tried_there() -> None:
    """Where inputs take many values, a point at an end of a numeric input's range gives its
    second pick to a design value that fewer than ``edge_coverage`` rows there hold: the trees
    carry the interior out to the end and would never try "b" at n = 256 (decision 0043)."""
    covered = proposals_at_the_end(1)
    at_end = covered[covered["n"] == 256]
    assert len(at_end) == 2 and (at_end["order"] == "b").any()
    plain = proposals_at_the_end(0)
    assert not ((plain["n"] == 256) & (plain["order"] == "b")).any()
    with pytest.raises(ValueError, match="edge_coverage"):
        ExploitSettings(edge_coverage=-1)
