"""The contract every sampler of ``mlkaps_gpu.sampling.SAMPLERS`` must honour.

Parametrised over the registry, so a sampler added there is covered without editing this file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.sampling import SAMPLERS, Sampler
from mlkaps_gpu.space import Parameter, Space


def mixed_space() -> Space:
    """A categorical input, a continuous input and constraints that depend on inputs."""
    return Space(
        [
            Parameter("n", "int", low=1, high=64, log=True),
            Parameter("gpu", "categorical", values=("A100", "W6600")),
            Parameter("density", "float", low=0.0, high=1.0),
        ],
        [
            Parameter("tile", "int", values=(1, 2, 4, 8, 16, 32)),
            Parameter("variant", "categorical", values=("v1", "v2", "v3")),
            Parameter("unroll", "int", low=1, high=4),
        ],
        ["tile <= n", "gpu == 'A100' or variant != 'v2'", "tile * unroll <= 64"],
    )


def mixed_by_hand(row: dict[str, Any]) -> bool:
    return (
        row["tile"] <= row["n"]
        and (row["gpu"] == "A100" or row["variant"] != "v2")
        and row["tile"] * row["unroll"] <= 64
    )


def tiny_space() -> Space:
    """All discrete: 21 valid configurations, so it can be exhausted."""
    return Space(
        [Parameter("m", "int", values=(1, 2, 3))],
        [Parameter("p", "int", low=1, high=4), Parameter("q", "bool")],
        ["p * m <= 6 or q"],
    )


def tiny_by_hand(row: dict[str, Any]) -> bool:
    return bool(row["p"] * row["m"] <= 6 or row["q"])


#: m = 1: 4 p x 2 q; m = 2: p <= 3 or q -> 3 + 4; m = 3: p <= 2 or q -> 2 + 4
TINY_VALID = 8 + 7 + 6

SPACES: dict[str, tuple[Callable[[], Space], Callable[[dict[str, Any]], bool]]] = {
    "mixed": (mixed_space, mixed_by_hand),
    "tiny": (tiny_space, tiny_by_hand),
}


@pytest.fixture(params=sorted(SAMPLERS))
def sampler_class(request: pytest.FixtureRequest) -> type[Sampler]:
    return SAMPLERS[request.param]


@pytest.fixture(params=sorted(SPACES))
def space_case(
    request: pytest.FixtureRequest,
) -> tuple[str, Space, Callable[[dict[str, Any]], bool]]:
    build, check = SPACES[request.param]
    return request.param, build(), check


def measure(rows: pd.DataFrame) -> pd.DataFrame:
    """Results of a fake executor: a smooth positive objective and status ``ok``."""
    numeric = rows.select_dtypes(include=["number", "bool"]).astype(float)
    time = 1.0 + (numeric.to_numpy() ** 2).sum(axis=1) / 100.0
    return pd.DataFrame({"time": time, "status": "ok"})


def keys(space: Space, rows: pd.DataFrame) -> list[tuple[Any, ...]]:
    return space.key(rows)


def drive(sampler: Sampler, batches: list[int]) -> list[pd.DataFrame]:
    """ask -> measure -> tell for each batch size; the asked tables."""
    asked = []
    for size in batches:
        rows = sampler.ask(size)
        sampler.tell(rows, measure(rows))
        asked.append(rows)
    return asked


# ---------------------------------------------------------------------------------- validity


def test_every_row_satisfies_the_constraints(sampler_class: type[Sampler], space_case: Any) -> None:
    _, space, check = space_case
    sampler = sampler_class(space, seed=3)
    for rows in drive(sampler, [12, 12]):
        assert list(rows.columns) == space.names
        assert space.is_valid(rows).all()
        assert all(check(row) for row in rows.to_dict("records"))


def test_rows_have_the_parameter_dtypes(sampler_class: type[Sampler]) -> None:
    space = mixed_space()
    rows = sampler_class(space, seed=0).ask(20)
    for name in space.names:
        expected = space.parameters[name].dtype
        assert rows[name].dtype == (object if expected is object else np.dtype(expected)), name


# ------------------------------------------------------------------------------- determinism


def test_same_seed_same_rows(sampler_class: type[Sampler], space_case: Any) -> None:
    _, space, _ = space_case
    first = drive(sampler_class(space, seed=11), [5, 7, 3])
    again = drive(sampler_class(space, seed=11), [5, 7, 3])
    for left, right in zip(first, again, strict=True):
        pd.testing.assert_frame_equal(left, right)


def test_different_seeds_differ(sampler_class: type[Sampler]) -> None:
    space = mixed_space()
    first = sampler_class(space, seed=1).ask(10)
    other = sampler_class(space, seed=2).ask(10)
    assert not first.equals(other)


# ---------------------------------------------------------------------------------- ask/tell


@pytest.mark.parametrize("batch", [1, 7, 50])
def test_ask_tell_batches_never_repeat_a_row(sampler_class: type[Sampler], batch: int) -> None:
    space = mixed_space()
    sampler = sampler_class(space, seed=5)
    asked = drive(sampler, [batch] * 4)
    assert [len(rows) for rows in asked] == [batch] * 4
    seen = [key for rows in asked for key in keys(space, rows)]
    assert len(seen) == len(set(seen))
    history = sampler.history_
    assert len(history) == 4 * batch
    assert {"time", "status"} <= set(history.columns)


def test_asked_but_not_told_rows_are_not_repeated(sampler_class: type[Sampler]) -> None:
    space = mixed_space()
    sampler = sampler_class(space, seed=4)
    first, second = sampler.ask(30), sampler.ask(30)  # a batch still being measured
    assert not set(keys(space, first)) & set(keys(space, second))


def test_told_rows_are_never_asked(sampler_class: type[Sampler], space_case: Any) -> None:
    name, space, _ = space_case
    told = space.sample_valid(30, np.random.default_rng(99)).drop_duplicates(ignore_index=True)
    if name == "tiny":
        assert len(told) < TINY_VALID
    sampler = sampler_class(space, seed=6)
    sampler.tell(told, measure(told))  # as on resume: measurements stored earlier
    asked = drive(sampler, [10, 10])
    told_keys = set(keys(space, told))
    for rows in asked:
        assert not told_keys & set(keys(space, rows))


def test_long_history_still_gives_new_valid_rows(sampler_class: type[Sampler]) -> None:
    # past any bootstrap phase: adaptive samplers fit their models here
    space = mixed_space()
    told = space.sample_valid(260, np.random.default_rng(0)).drop_duplicates(ignore_index=True)
    sampler = sampler_class(space, seed=8)
    sampler.tell(told, measure(told))
    rows = sampler.ask(20)
    assert len(rows) == 20
    assert space.is_valid(rows).all()
    assert not set(keys(space, told)) & set(keys(space, rows))
    assert len(set(keys(space, rows))) == 20


def test_tell_checks_lengths(sampler_class: type[Sampler]) -> None:
    space = tiny_space()
    sampler = sampler_class(space, seed=0)
    rows = sampler.ask(3)
    with pytest.raises(ValueError, match="length"):
        sampler.tell(rows, measure(rows).iloc[:2])


# -------------------------------------------------------------------------------- exhaustion


@pytest.mark.parametrize("batch", [1, 7, 50])
def test_exhausting_a_finite_space(sampler_class: type[Sampler], batch: int) -> None:
    space = tiny_space()
    sampler = sampler_class(space, seed=2)
    sizes = []
    everything = []
    while True:
        rows = sampler.ask(batch)
        sizes.append(len(rows))
        if len(rows) == 0:
            break
        sampler.tell(rows, measure(rows))
        everything += keys(space, rows)
        assert len(sizes) <= TINY_VALID + 1
    # every valid configuration exactly once, full batches until the last one
    assert len(everything) == len(set(everything)) == TINY_VALID
    full, rest = divmod(TINY_VALID, batch)
    assert sizes == [batch] * full + ([rest] if rest else []) + [0]
    empty = sampler.ask(batch)
    assert len(empty) == 0
    assert list(empty.columns) == space.names


def test_the_last_rows_of_a_finite_space_are_found(sampler_class: type[Sampler]) -> None:
    # random draws alone keep hitting seen rows: 30 unseen among 730 are rarely all found
    space = Space(
        [Parameter("m", "int", values=(1, 2))],
        [Parameter("p", "int", low=1, high=20), Parameter("r", "int", low=1, high=20)],
        ["p + r <= 40 - 5 * m"],
    )
    total = sum(p + r <= 40 - 5 * m for m in (1, 2) for p in range(1, 21) for r in range(1, 21))
    assert total == 730
    sampler = sampler_class(space, seed=0)
    rows = sampler.ask(total - 30)
    rest = sampler.ask(50)
    assert (len(rows), len(rest)) == (total - 30, 30)
    everything = pd.concat([rows, rest], ignore_index=True)
    assert len(set(keys(space, everything))) == total
    assert space.is_valid(everything).all()
    assert len(sampler.ask(1)) == 0


def test_exhaustion_without_tell(sampler_class: type[Sampler]) -> None:
    space = tiny_space()
    sampler = sampler_class(space, seed=9)
    first = sampler.ask(15)
    second = sampler.ask(15)
    assert (len(first), len(second)) == (15, TINY_VALID - 15)
    assert len(sampler.ask(1)) == 0


def test_space_without_inputs(sampler_class: type[Sampler]) -> None:
    space = Space([], [Parameter("p", "int", low=1, high=6), Parameter("q", "bool")], ["p <= 4"])
    sampler = sampler_class(space, seed=1)
    first, second = sampler.ask(5), sampler.ask(5)
    assert (len(first), len(second)) == (5, 3)  # 4 x 2 valid configurations
    assert space.is_valid(pd.concat([first, second])).all()
    assert len(sampler.ask(5)) == 0


# ------------------------------------------------------------------------------ bad requests


@pytest.mark.parametrize("n", [0, -1, 2.5])
def test_ask_needs_a_positive_integer(sampler_class: type[Sampler], n: Any) -> None:
    sampler = sampler_class(tiny_space(), seed=0)
    with pytest.raises(ValueError, match="positive integer"):
        sampler.ask(n)
