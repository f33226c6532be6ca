"""Property tests: the config loader and the constraint parser never raise anything but their
own one-line errors, whatever they are given."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlkaps_gpu.campaign import ConfigError, parse_config
from mlkaps_gpu.campaign._setup import prepare
from mlkaps_gpu.space import ConstraintError, Parameter, parse_constraint
from mlkaps_gpu.testing._fuzz import random_config, random_constraint

PARAMETERS = {
    "n": Parameter("n", "int", low=1, high=1024),
    "m": Parameter("m", "float", low=0.5, high=2.0),
    "block": Parameter("block", "int", values=(1, 2, 4)),
    "tile": Parameter("tile", "int", values=(1, 2)),
}


def _load(text: str, folder: Path) -> str:
    try:
        prepare(parse_config(text, path=folder / "fuzz.toml", label="fuzz.toml"))
    except ConfigError as error:
        message = str(error)
        assert "\n" not in message.strip()
        assert message.startswith("fuzz.toml")
        return "rejected"
    return "accepted"


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**32))
def test_random_configs_are_accepted_or_rejected_cleanly(seed: int, tmp_path_factory) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    _load(random_config(random.Random(seed)), folder)


@settings(deadline=None)
@given(text=st.text(max_size=300))
def test_arbitrary_text_is_rejected_cleanly(text: str, tmp_path_factory) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    _load(text, folder)


@settings(deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32))
def test_random_constraints_parse_or_raise_constraint_error(seed: int) -> None:
    text = random_constraint(random.Random(seed))
    try:
        parse_constraint(text, PARAMETERS)
    except ConstraintError as error:
        assert "\n" not in str(error)


@settings(deadline=None)
@given(text=st.text(max_size=200))
def test_arbitrary_constraint_text(text: str) -> None:
    try:
        parse_constraint(text, PARAMETERS)
    except ConstraintError:
        pass


@pytest.mark.parametrize(
    "text",
    [
        " + ".join(["n"] * 2500) + " < 5",
        "(" * 5000 + "n" + ")" * 5000 + " < 5",
        "not " * 2400 + "n",
        "n < " * 2499 + "n",
    ],
    ids=["long_sum", "deep_parentheses", "many_nots", "long_chain"],
)
def test_ten_thousand_characters_parse_or_are_refused_cleanly(text: str) -> None:
    """(Their parse time is measured by experiments/fuzz_config.py, not asserted here.)"""
    assert len(text) >= 9_000
    try:
        constraint = parse_constraint(text, PARAMETERS)
    except ConstraintError as error:
        assert "\n" not in str(error)
    else:
        columns = {"n": np.array([1.0, 3.0]), "m": 1.0, "block": 1.0, "tile": 1.0}
        assert constraint.evaluate(columns, 2).dtype == bool


def test_fuzzer_produces_both_outcomes(tmp_path: Path) -> None:
    outcomes = {_load(random_config(random.Random(seed)), tmp_path) for seed in range(300)}
    assert outcomes == {"accepted", "rejected"}
