"""Parameter kinds, ranges and value lists, definition errors, grids, sampling and codes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlkaps_gpu.space import KINDS, Parameter, SpaceError
from mlkaps_gpu.space._parameters import DEFAULT_FLOAT_LEVELS, DEFAULT_MAX_LEVELS

# ------------------------------------------------------------------------------------ kinds


def test_kinds_are_the_documented_four() -> None:
    assert set(KINDS) == {"int", "float", "categorical", "bool"}


def test_int_range_enumerates_every_integer() -> None:
    parameter = Parameter("n", "int", low=3, high=9)
    assert parameter.domain_values().tolist() == list(range(3, 10))
    assert parameter.domain_values().dtype == np.int64
    assert parameter.low == 3 and parameter.high == 9
    assert not parameter.is_ordinal_list


def test_int_values_keep_their_order() -> None:
    parameter = Parameter("tile", "int", values=(32, 4, 16))
    assert parameter.domain_values().tolist() == [32, 4, 16]
    assert parameter.is_ordinal_list
    assert parameter.n_values == 3


def test_int_values_accept_integral_floats_and_refuse_fractions() -> None:
    assert Parameter("n", "int", values=(1.0, 2)).domain_values().tolist() == [1, 2]
    with pytest.raises(SpaceError, match="'n'"):
        Parameter("n", "int", values=(1, 2.5))


def test_wide_int_range_is_thinned_to_the_level_limit() -> None:
    parameter = Parameter("n", "int", low=1, high=10 * DEFAULT_MAX_LEVELS)
    values = parameter.domain_values()
    assert len(values) <= DEFAULT_MAX_LEVELS
    assert values[0] == 1 and values[-1] == 10 * DEFAULT_MAX_LEVELS
    assert np.all(np.diff(values) > 0)


def test_float_range_is_discretised_to_levels() -> None:
    default = Parameter("x", "float", low=0.0, high=1.0)
    assert len(default.domain_values()) == DEFAULT_FLOAT_LEVELS
    parameter = Parameter("x", "float", low=0.0, high=1.0, levels=5)
    assert parameter.domain_values().tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_log_float_range_is_discretised_geometrically() -> None:
    parameter = Parameter("x", "float", low=1.0, high=1000.0, log=True, levels=4)
    np.testing.assert_allclose(parameter.domain_values(), [1.0, 10.0, 100.0, 1000.0])


def test_categorical_values_are_strings() -> None:
    parameter = Parameter("gpu", "categorical", values=("A100", 7))
    assert parameter.domain_values().tolist() == ["A100", "7"]
    assert not parameter.is_numeric
    assert parameter.dtype is object


def test_bool_defaults_to_false_true() -> None:
    parameter = Parameter("flag", "bool")
    assert parameter.domain_values().tolist() == [False, True]
    assert parameter.is_numeric


def test_bool_given_as_range_is_still_two_values() -> None:
    assert Parameter("flag", "bool", low=0, high=1).domain_values().tolist() == [False, True]
    assert Parameter("flag", "bool", low=1, high=1).domain_values().tolist() == [True]


# ------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"kind": "complex", "low": 0, "high": 1}, "unknown type"),
        ({"kind": "int", "low": 5, "high": 1}, "min"),
        ({"kind": "float", "low": 2.0, "high": 1.0}, "min"),
        ({"kind": "int", "values": ()}, "empty"),
        ({"kind": "categorical", "values": []}, "empty"),
        ({"kind": "int", "values": (1, 2, 1)}, "duplicates"),
        ({"kind": "float", "values": (1.0, 1)}, "duplicates"),
        ({"kind": "categorical", "values": ("a", "a")}, "duplicates"),
        ({"kind": "int", "low": 0, "high": 8, "log": True}, "log"),
        ({"kind": "float", "low": -1.0, "high": 8.0, "log": True}, "log"),
        ({"kind": "int", "values": (0, 1, 2), "log": True}, "log"),
        ({"kind": "int", "values": (1, 2), "low": 1, "high": 2}, "not both"),
        ({"kind": "categorical", "low": 1, "high": 2}, "needs 'values'"),
        ({"kind": "int", "low": 1}, "range"),
        ({"kind": "float", "low": 0.0, "high": math.inf}, "finite"),
        ({"kind": "float", "low": 0.0, "high": 1.0, "levels": 0}, "levels"),
        ({"kind": "bool", "values": (0, 2)}, "true/false"),
    ],
)
def test_bad_definitions_raise_space_error_naming_the_parameter(
    arguments: dict[str, object], problem: str
) -> None:
    with pytest.raises(SpaceError) as raised:
        Parameter("block_size_x", **arguments)  # type: ignore[arg-type]
    message = str(raised.value)
    assert "'block_size_x'" in message
    assert problem in message


def test_name_must_be_an_identifier() -> None:
    with pytest.raises(SpaceError, match="identifier"):
        Parameter("block size", "int", low=1, high=2)


# ------------------------------------------------------------------------------------ grids


def test_int_range_grid_is_regular() -> None:
    parameter = Parameter("n", "int", low=0, high=100)
    assert parameter.grid(5).tolist() == [0, 25, 50, 75, 100]


def test_log_int_range_grid_is_geometric() -> None:
    parameter = Parameter("n", "int", low=1, high=4096, log=True)
    assert parameter.grid(5).tolist() == [1, 8, 64, 512, 4096]


def test_log_float_range_grid_is_geometric() -> None:
    grid = Parameter("x", "float", low=0.01, high=100.0, log=True).grid(5)
    np.testing.assert_allclose(grid, [0.01, 0.1, 1.0, 10.0, 100.0])
    ratios = grid[1:] / grid[:-1]
    np.testing.assert_allclose(ratios, ratios[0])


def test_grid_of_one_is_the_middle() -> None:
    assert Parameter("x", "float", low=2.0, high=4.0).grid(1).tolist() == [3.0]
    np.testing.assert_allclose(Parameter("x", "float", low=1.0, high=100.0, log=True).grid(1), 10)


def test_narrow_int_grid_has_no_repeated_values() -> None:
    assert Parameter("n", "int", low=1, high=3).grid(8).tolist() == [1, 2, 3]


def test_categorical_and_bool_grids_hold_every_value_whatever_the_size() -> None:
    gpus = Parameter("gpu", "categorical", values=("A100", "A4000", "MI250X"))
    assert gpus.grid(1).tolist() == ["A100", "A4000", "MI250X"]
    assert Parameter("flag", "bool").grid(1).tolist() == [False, True]


def test_numeric_value_list_grid_picks_evenly_spread_values() -> None:
    parameter = Parameter("tile", "int", values=(1, 2, 4, 8, 16))
    assert parameter.grid(3).tolist() == [1, 4, 16]
    assert parameter.grid(10).tolist() == [1, 2, 4, 8, 16]


def test_grid_size_below_one_is_refused() -> None:
    with pytest.raises(SpaceError, match="'n'"):
        Parameter("n", "int", low=1, high=3).grid(0)


# ---------------------------------------------------------------------- sampling in domain


def _range_parameter(kind: str, low: float, high: float, log: bool) -> Parameter:
    low, high = min(low, high), max(low, high)
    if kind == "int":
        return Parameter("p", "int", low=int(low), high=int(high), log=log)
    return Parameter("p", "float", low=low, high=high, log=log)


@settings(deadline=None)
@given(
    kind=st.sampled_from(["int", "float"]),
    low=st.floats(1e-3, 1e5),
    high=st.floats(1e-3, 1e5),
    log=st.booleans(),
    unit=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8),
)
def test_from_unit_stays_in_the_domain(
    kind: str, low: float, high: float, log: bool, unit: list[float]
) -> None:
    if kind == "int":
        low, high = max(1.0, math.floor(low)), max(1.0, math.floor(high))
    parameter = _range_parameter(kind, low, high, log)
    points = np.array([*unit, 0.0, 1.0, np.nextafter(1.0, 0.0)])
    continuous = parameter.from_unit(points, discrete=False)
    assert parameter.contains(continuous).all(), continuous
    discrete = parameter.from_unit(points, discrete=True)
    assert (parameter.codes(discrete) >= 0).all()


def test_from_unit_covers_a_small_int_range_uniformly() -> None:
    parameter = Parameter("n", "int", low=1, high=4)
    values = parameter.from_unit(np.linspace(0, 1, 4000, endpoint=False), discrete=False)
    counts = np.bincount(values, minlength=5)[1:]
    assert counts.min() > 900


def test_from_unit_discrete_hits_every_value_of_a_list() -> None:
    parameter = Parameter("tile", "int", values=(2, 8, 32))
    values = parameter.from_unit(np.array([0.0, 0.34, 0.99]), discrete=True)
    assert values.tolist() == [2, 8, 32]


@pytest.mark.parametrize(
    "parameter",
    [
        Parameter("n", "int", low=1, high=1000, log=True),
        Parameter("x", "float", low=-3.0, high=3.0),
        Parameter("x", "float", low=0.5, high=50.0, log=True),
        Parameter("gpu", "categorical", values=("A100", "W6600")),
        Parameter("flag", "bool"),
        Parameter("tile", "int", values=(1, 3, 9)),
    ],
    ids=lambda p: f"{p.kind}-{p.name}-{'log' if p.log else 'lin'}",
)
def test_sample_stays_in_domain_and_is_seeded(parameter: Parameter) -> None:
    first = parameter.sample(500, np.random.default_rng(4), discrete=False)
    again = parameter.sample(500, np.random.default_rng(4), discrete=False)
    assert parameter.contains(first).all()
    assert np.array_equal(first, again)
    assert len(first) == 500


def test_log_sampling_is_log_uniform() -> None:
    parameter = Parameter("x", "float", low=1.0, high=10_000.0, log=True)
    values = parameter.sample(20_000, np.random.default_rng(0), discrete=False)
    decades = np.bincount(np.floor(np.log10(values)).astype(int), minlength=4)[:4]
    assert decades.min() > 4000  # ~5000 per decade; a linear sampler puts ~20 in [1, 10)


# --------------------------------------------------------------------------------- codes


@pytest.mark.parametrize(
    "parameter",
    [
        Parameter("tile", "int", values=(32, 4, 16, 8)),
        Parameter("n", "int", low=-3, high=5),
        Parameter("x", "float", low=0.1, high=0.9, levels=7),
        Parameter("x", "float", low=0.01, high=10.0, log=True, levels=9),
        Parameter("gpu", "categorical", values=("MI250X", "A100", "W7800")),
        Parameter("flag", "bool"),
    ],
    ids=lambda p: f"{p.kind}-{p.name}",
)
def test_codes_round_trip(parameter: Parameter) -> None:
    domain = parameter.domain_values()
    codes = np.arange(len(domain))[::-1]
    assert parameter.codes(domain[codes]).tolist() == codes.tolist()


def test_values_outside_the_domain_get_code_minus_one() -> None:
    assert Parameter("tile", "int", values=(4, 8)).codes([4, 5, 8]).tolist() == [0, -1, 1]
    gpu = Parameter("gpu", "categorical", values=("A100",))
    assert gpu.codes(["A100", "T4"]).tolist() == [0, -1]


def test_numeric_features_use_category_index() -> None:
    gpu = Parameter("gpu", "categorical", values=("b", "a"))
    assert gpu.numeric(["a", "b", "a"]).tolist() == [1.0, 0.0, 1.0]
    assert Parameter("n", "int", low=0, high=9).numeric([3, 4]).tolist() == [3.0, 4.0]


def test_contains_checks_range_and_integrality() -> None:
    parameter = Parameter("n", "int", low=1, high=8)
    assert parameter.contains(np.array([1.0, 8.0, 0.0, 9.0, 2.5])).tolist() == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_describe_is_json_like() -> None:
    assert Parameter("n", "int", low=1, high=8, log=True).describe() == {
        "name": "n",
        "type": "int",
        "range": [1, 8],
        "log": True,
    }
    assert Parameter("g", "categorical", values=("a",)).describe()["values"] == ["a"]
