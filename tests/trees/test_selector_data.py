"""Selectors written as data (``to_dict``) and read back (``from_dict``): identical answers,
identical header, and a clear error naming the key for data that is no selector."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.codegen import boundary_inputs, render_header
from mlkaps_gpu.space import Space
from mlkaps_gpu.trees import JointSelector, PerParameterSelector, Selector
from mlkaps_gpu.trees._selector import SelectorDataError
from tests.trees.synthetic import BLOCK, DESIGN, GPU, N, synthetic_optima


def _space() -> Space:
    return Space([N, GPU], list(DESIGN), constraints=["block * unroll <= 2048"])


def _fitted(kind: str) -> Selector:
    optima = synthetic_optima(np.random.default_rng(3), with_density=False)
    space = _space()
    optima = optima[space.satisfies_constraints(optima)].reset_index(drop=True)
    inputs, design = [N, GPU], list(DESIGN)
    if kind == "joint":

        def score(table: pd.DataFrame) -> np.ndarray:
            return (
                np.abs(np.log2(table["block"].to_numpy(dtype=float)) - 6)
                + table["unroll"].to_numpy(dtype=float) / 16
            )

        return JointSelector(max_depth=5).fit(optima, inputs, design, space=space, score=score)
    return PerParameterSelector(max_depth=6).fit(optima, inputs, design, space=space)


@pytest.mark.parametrize("kind", ["per_parameter", "joint"])
def test_round_trip_gives_identical_answers_and_header(kind: str) -> None:
    selector = _fitted(kind)
    text = json.dumps(selector.to_dict())
    loaded = Selector.from_dict(json.loads(text))
    assert type(loaded) is type(selector)
    table = boundary_inputs(selector, 3000, np.random.default_rng(0))
    pd.testing.assert_frame_equal(loaded.select(table), selector.select(table))
    assert render_header(loaded, "rt") == render_header(selector, "rt")
    assert loaded.grown_depth() == selector.grown_depth()
    # written again, the data is the same: nothing was lost on the way
    assert json.dumps(loaded.to_dict()) == text


def test_thresholds_survive_json_exactly() -> None:
    selector = _fitted("per_parameter")
    loaded = Selector.from_dict(json.loads(json.dumps(selector.to_dict())))
    for before, after in zip(selector.model_.trees, loaded.model_.trees, strict=True):
        assert before.threshold.tobytes() == after.threshold.tobytes()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d.update(format="pickle"), "'format'"),
        (lambda d: d.update(version=99), "'version'"),
        (lambda d: d.update({"class": "os.system"}), "'class'"),
        (lambda d: d["params"].update(evil=1), "params: unknown key"),
        (lambda d: d["model"]["trees"][0].update(children_left=[1, 2]), "model.trees[0]"),
        (lambda d: d["model"]["trees"][0]["threshold"].__setitem__(0, "x"), "threshold"),
        (lambda d: d["model"]["outputs"][0].update(codes=[99] * 500), "model.outputs[0]"),
        (lambda d: d["model"]["inputs"][0].update(kind="pointer"), "model.inputs[0]"),
        (lambda d: d["model"]["validity"].update(constraints=["__import__('os')"]), "validity"),
        (lambda d: d.update(model=[]), "model: expected dict"),
    ],
)
def test_damaged_data_is_refused_naming_the_key(change, named: str) -> None:
    data = json.loads(json.dumps(_fitted("per_parameter").to_dict()))
    change(data)
    with pytest.raises(SelectorDataError, match=named.replace("[", r"\[").replace("(", r"\(")):
        Selector.from_dict(data)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r.update(order=[[0] * len(r["order"][0])] * len(r["order"])), "permutation"),
        (lambda r: r["order"].pop(), "leaves"),
        (lambda r: r["order"][0].pop(), "model.ranking"),
        (lambda r: r.update(portfolio=[[99] * len(r["portfolio"][0])]), "model.ranking"),
        (lambda r: r.update(extra=1), "model.ranking: keys"),
        (lambda r: r["portfolio"].__setitem__(0, "x"), "model.ranking.portfolio"),
    ],
)
def test_a_damaged_ranking_is_refused_naming_the_key(change, named: str) -> None:
    data = json.loads(json.dumps(_fitted("joint").to_dict()))
    change(data["model"]["ranking"])
    with pytest.raises(SelectorDataError, match=named):
        Selector.from_dict(data)


def test_a_selector_written_before_rankings_loads_without_one() -> None:
    data = json.loads(json.dumps(_fitted("joint").to_dict()))
    del data["model"]["ranking"]
    loaded = Selector.from_dict(data)
    assert loaded.model_.ranking is None
    assert "_ranked(" not in render_header(loaded, "old")


def test_value_list_domains_round_trip() -> None:
    selector = _fitted("per_parameter")
    loaded = Selector.from_dict(json.loads(json.dumps(selector.to_dict())))
    assert loaded.design_ == selector.design_
    assert loaded.inputs_ == selector.inputs_
    assert loaded.design_[0] == BLOCK
