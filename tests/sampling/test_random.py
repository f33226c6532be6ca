"""What distinguishes the random and Latin hypercube samplers."""

from __future__ import annotations

import numpy as np
import pytest

from mlkaps_gpu.sampling import LHSSampler, RandomSampler
from mlkaps_gpu.space import Parameter, Space


def unconstrained_space() -> Space:
    return Space(
        [Parameter("x", "float", low=0.0, high=1.0), Parameter("y", "float", low=-2.0, high=2.0)],
        [Parameter("tile", "int", values=tuple(range(10)))],
    )


def test_lhs_puts_one_point_in_each_stratum_of_every_dimension() -> None:
    n = 20
    rows = LHSSampler(unconstrained_space(), seed=3).ask(n)
    assert sorted(np.floor(rows["x"] * n).astype(int)) == list(range(n))
    assert sorted(np.floor((rows["y"] + 2.0) / 4.0 * n).astype(int)) == list(range(n))
    # design codes are stratified too: 20 rows over 10 values -> each value twice
    assert np.bincount(rows["tile"], minlength=10).tolist() == [2] * 10


def test_random_sampler_is_not_stratified_but_uniform() -> None:
    rows = RandomSampler(unconstrained_space(), seed=3).ask(2000)
    counts = np.bincount(np.floor(rows["x"] * 10).astype(int), minlength=10)
    assert counts.min() > 150 and counts.max() < 250
    assert np.bincount(rows["tile"], minlength=10).min() > 150


@pytest.mark.parametrize("sampler_class", [RandomSampler, LHSSampler])
def test_inputs_without_valid_design_get_a_whole_new_row(sampler_class: type) -> None:
    space = Space(
        [Parameter("n", "int", low=1, high=100)],
        [Parameter("tile", "int", values=(32, 64))],
        ["tile <= n"],  # n < 32 admits nothing
    )
    rows = sampler_class(space, seed=0).ask(60)
    assert len(rows) == 60
    assert (rows["n"] >= 32).all()
    assert (rows["tile"] <= rows["n"]).all()
