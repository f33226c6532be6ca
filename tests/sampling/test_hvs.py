"""What distinguishes HVS and HVSr: tree partitions, volume x error allocation, LHS in boxes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2

from mlkaps_gpu.sampling import GAAdaptiveSampler, HVSrSampler, HVSSampler
from mlkaps_gpu.sampling._hvs import (
    allocate,
    partition_error,
    unit_coordinates,
    variance_upper_bound,
)
from mlkaps_gpu.space import Parameter, Space


def plane() -> Space:
    """Two continuous inputs and one design parameter, no constraints."""
    return Space(
        [Parameter("x", "float", low=0.0, high=1.0), Parameter("y", "float", low=0.0, high=1.0)],
        [Parameter("tile", "int", values=(1, 2, 4, 8))],
    )


def told(sampler: HVSSampler, rows: pd.DataFrame, values: np.ndarray) -> None:
    sampler.tell(rows, pd.DataFrame({"time": values, "status": "ok"}))


def test_unit_coordinates_invert_the_sampling_map() -> None:
    space = Space(
        [
            Parameter("n", "int", low=16, high=4096, log=True),
            Parameter("d", "float", low=-1.0, high=3.0),
            Parameter("gpu", "categorical", values=("a", "b", "c", "d")),
        ],
        [Parameter("tile", "int", values=(8, 16, 32, 64, 128))],
    )
    u = np.array([0.05, 0.3, 0.55, 0.8, 0.95])
    table = pd.DataFrame(
        {
            "n": space.parameters["n"].from_unit(u, discrete=False),
            "d": space.parameters["d"].from_unit(u, discrete=False),
            "gpu": space.parameters["gpu"].from_unit(u[:4], discrete=False).tolist() + ["a"],
            "tile": space.parameters["tile"].from_unit(u, discrete=True),
        }
    )
    unit = unit_coordinates(space, table)
    np.testing.assert_allclose(unit[:, 1], u)  # continuous: exact inverse
    assert np.abs(unit[:, 0] - u).max() < 0.02  # int: up to the rounding
    np.testing.assert_allclose(unit[:4, 2], (np.array([0, 1, 2, 3]) + 0.5) / 4)  # cell centres
    np.testing.assert_allclose(unit[:, 3], (np.array([0, 1, 2, 4, 4]) + 0.5) / 5)


def test_error_is_the_upper_end_of_the_chi_squared_interval() -> None:
    values = np.array([1.0, 2.0, 4.0, 3.0, 5.0, 2.5])
    variance = values.var(ddof=1)
    expected = variance * 5 / chi2.ppf(0.025, 5)
    assert variance_upper_bound(values) == pytest.approx(expected)
    assert expected > variance
    assert partition_error(values, "relative") == pytest.approx(expected / values.mean() ** 2)
    # HVSr is scale free, HVS is not
    assert partition_error(100 * values, "relative") == pytest.approx(
        partition_error(values, "relative")
    )
    assert partition_error(100 * values, "variance") == pytest.approx(1e4 * expected)


def test_allocation_is_proportional_and_exact() -> None:
    counts = allocate(np.array([3.0, 1.0, 0.0, 1.0]), np.ones(4), 10)
    assert counts.sum() == 10
    assert counts.tolist() == [6, 2, 0, 2]
    # no score anywhere: by volume
    assert allocate(np.zeros(3), np.array([0.5, 0.25, 0.25]), 8).tolist() == [4, 2, 2]


def test_partitions_tile_the_cube_and_hold_their_samples() -> None:
    space = plane()
    sampler = HVSSampler(space, seed=0, min_samples_leaf=5)
    rows = space.sample_valid(200, np.random.default_rng(1))
    told(sampler, rows, 1.0 + 10.0 * (rows["x"] > 0.6) + rows["tile"].to_numpy())
    partitions = sampler.partition()
    assert len(partitions) > 2
    assert sum(p.volume for p in partitions) == pytest.approx(1.0)
    assert sum(p.samples for p in partitions) == 200
    unit = unit_coordinates(space, rows)
    inside = [
        ((unit >= p.lower) & (unit <= p.upper)).all(axis=1).sum() for p in partitions
    ]  # each sample lies in (at least) its own box
    assert sum(inside) >= 200
    for partition in partitions:  # discrete sides lie on cell borders
        for bound in (partition.lower[2], partition.upper[2]):
            assert bound * 4 == pytest.approx(round(bound * 4))


def test_budget_goes_where_the_variance_is() -> None:
    space = plane()
    rng = np.random.default_rng(2)
    rows = space.sample_valid(300, rng)
    noisy = rows["x"].to_numpy() > 0.8  # 20 % of the volume, all of the variance
    values = 10.0 + np.where(noisy, rng.normal(0.0, 5.0, len(rows)), 0.01 * rng.random(len(rows)))
    sampler = HVSSampler(space, seed=0)
    told(sampler, rows, values)
    new = sampler.ask(100)
    assert (new["x"] > 0.75).mean() > 0.6


def test_hvs_chases_absolute_variance_and_hvsr_relative_variance() -> None:
    space = plane()
    rng = np.random.default_rng(3)
    rows = space.sample_valid(400, rng)
    right = rows["x"].to_numpy() > 0.5
    # same relative spread everywhere, but values 100 times larger on the right
    values = np.where(right, 100.0, 1.0) * (1.0 + 0.3 * rng.random(len(rows)))
    hvs, hvsr = HVSSampler(space, seed=0), HVSrSampler(space, seed=0)
    told(hvs, rows, values)
    told(hvsr, rows, values)
    assert (hvs.ask(100)["x"] > 0.5).mean() > 0.9
    assert 0.3 < (hvsr.ask(100)["x"] > 0.5).mean() < 0.7


def test_objective_bound_stops_outliers_attracting_the_budget() -> None:
    space = plane()
    rng = np.random.default_rng(4)
    rows = space.sample_valid(300, rng)
    values = 1.0 + rng.random(len(rows))
    corner = np.flatnonzero((rows["x"] > 0.9).to_numpy())[:3]
    values[corner] = 1e6  # failures recorded as huge times
    unbounded = HVSSampler(space, seed=0)
    bounded = HVSSampler(space, seed=0, objective_bound=2.0)  # the normal range
    told(unbounded, rows, values)
    told(bounded, rows, values)
    assert (unbounded.ask(60)["x"] > 0.85).mean() > 0.8
    assert (bounded.ask(60)["x"] > 0.85).mean() < 0.4


def test_new_rows_are_a_latin_hypercube_inside_each_box() -> None:
    space = plane()
    sampler = HVSSampler(space, seed=5, min_samples_leaf=10)
    rows = space.sample_valid(200, np.random.default_rng(5))
    told(sampler, rows, 1.0 + 20.0 * rows["y"].to_numpy() ** 2 + rows["x"].to_numpy())
    new = sampler.ask(60)
    unit = unit_coordinates(space, new)
    start = 0
    for partition in (p for p in sampler.partitions_ if p.allocated):
        block = unit[start : start + partition.allocated]
        start += partition.allocated
        assert ((block >= partition.lower - 1e-12) & (block <= partition.upper + 1e-12)).all()
        for axis in (0, 1):  # one point per stratum of each continuous side
            relative = (block[:, axis] - partition.lower[axis]) / (
                partition.upper[axis] - partition.lower[axis]
            )
            strata = np.floor(relative * partition.allocated).astype(int)
            assert sorted(strata) == list(range(partition.allocated))
    assert start == 60


def test_repaired_rows_stay_in_their_box() -> None:
    space = Space(
        [Parameter("n", "int", low=1, high=64)],
        [
            Parameter("tile", "int", values=(1, 2, 4, 8, 16, 32)),
            Parameter("u", "int", low=1, high=4),
        ],
        ["tile <= n", "tile * u <= 32"],
    )
    sampler = HVSSampler(space, seed=6, min_samples_leaf=8)
    rows = space.sample_valid(150, np.random.default_rng(6))
    told(sampler, rows, rows["n"] / rows["tile"] + 3.0 * rows["u"])
    new = sampler.ask(80)
    assert space.is_valid(new).all()
    unit = unit_coordinates(space, new)
    start = 0
    for partition in (p for p in sampler.partitions_ if p.allocated):
        block = unit[start : start + partition.allocated]
        start += partition.allocated
        assert ((block[:, 1:] >= partition.lower[1:]) & (block[:, 1:] <= partition.upper[1:])).all()


def test_ga_adaptive_accepts_and_feeds_the_adaptive_sub_samplers() -> None:
    space = plane()
    for name, kind in (("hvs", HVSSampler), ("hvsr", HVSrSampler)):
        sampler = GAAdaptiveSampler(space, seed=0, budget=200, sub_sampler=name)
        assert type(sampler.sub_sampler) is kind
        for _ in range(3):
            rows = sampler.ask(30)
            told(sampler, rows, 1.0 + rows["x"].to_numpy())  # type: ignore[arg-type]
        assert len(sampler.sub_sampler.history_) == 90  # every measurement is told
    with pytest.raises(ValueError, match="hvsr"):
        GAAdaptiveSampler(space, sub_sampler="sobol")
