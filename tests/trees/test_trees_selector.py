"""PerParameterSelector: fitting, Python selection, agreement with scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from mlkaps_gpu.codegen import boundary_inputs
from mlkaps_gpu.space._parameters import Parameter
from mlkaps_gpu.trees import PerParameterSelector, TreeStructure


def sklearn_answer(selector: PerParameterSelector, table: pd.DataFrame) -> dict[str, np.ndarray]:
    """What the fitted estimators predict, mapped to domain values (regressors: snapped)."""
    features = np.column_stack([p.numeric(table[p.name]) for p in selector.inputs_])
    answer = {}
    for parameter in selector.design_:
        estimator = selector.trees_[parameter.name]
        predicted = estimator.predict(features)
        domain = parameter.domain_values()
        if isinstance(estimator, DecisionTreeClassifier):
            answer[parameter.name] = domain[predicted.astype(np.int64)]
        else:
            distance = np.abs(domain.astype(np.float64)[None, :] - predicted[:, None])
            answer[parameter.name] = domain[np.argmin(distance, axis=1)]
    return answer


def test_estimator_kinds(selector: PerParameterSelector) -> None:
    kinds = {name: type(estimator) for name, estimator in selector.trees_.items()}
    assert kinds == {
        "block": DecisionTreeClassifier,
        "algo": DecisionTreeClassifier,
        "use_shared": DecisionTreeClassifier,
        "unroll": DecisionTreeRegressor,
    }
    assert [p.name for p in selector.inputs_] == ["n", "gpu"]
    assert [p.name for p in selector.design_] == ["block", "algo", "use_shared", "unroll"]


def test_select_dtypes_and_domain(selector: PerParameterSelector, optima: pd.DataFrame) -> None:
    chosen = selector.select(optima)
    assert list(chosen.columns) == ["block", "algo", "use_shared", "unroll"]
    assert chosen.index.equals(optima.index)
    assert chosen["block"].dtype == np.int64
    assert chosen["algo"].dtype == object
    assert chosen["use_shared"].dtype == bool
    assert chosen["unroll"].dtype == np.int64
    assert set(chosen["block"]) <= {32, 64, 128, 256}
    assert set(chosen["algo"]) <= {"tiled", "panel-recursive", "naive"}
    assert set(chosen["unroll"]) <= set(range(1, 17))


def test_select_reproduces_training_optima_mostly(
    selector: PerParameterSelector, optima: pd.DataFrame
) -> None:
    chosen = selector.select(optima)
    # Depth-8 trees on ~100 rows nearly interpolate; a broken feature mapping would not.
    assert (chosen["algo"] == optima["algo"]).mean() > 0.9
    assert (chosen["block"] == optima["block"]).mean() > 0.8


def test_select_equals_sklearn_on_boundary_inputs(selector: PerParameterSelector) -> None:
    table = boundary_inputs(selector, 2000, np.random.default_rng(3))
    chosen = selector.select(table)
    for name, expected in sklearn_answer(selector, table).items():
        np.testing.assert_array_equal(chosen[name].to_numpy(), expected, err_msg=name)


def test_nan_and_extremes_follow_sklearn(density_selector: PerParameterSelector) -> None:
    table = boundary_inputs(density_selector, 1000, np.random.default_rng(5))
    # scikit-learn refuses inf and values beyond float32; it accepts NaN (missing values).
    finite = table[~np.isinf(table["density"]) & ~(table["density"].abs() > 3.4e38)]
    assert finite["density"].isna().sum() > 0
    chosen = density_selector.select(finite)
    for name, expected in sklearn_answer(density_selector, finite).items():
        np.testing.assert_array_equal(chosen[name].to_numpy(), expected, err_msg=name)
    features = np.column_stack([p.numeric(finite[p.name]) for p in density_selector.inputs_])
    for estimator in density_selector.trees_.values():
        structure = TreeStructure.from_sklearn(estimator)
        np.testing.assert_array_equal(
            structure.leaf_nodes[structure.apply(features)], estimator.apply(features)
        )


def test_infinite_float_input_goes_like_its_float32_rounding(
    density_selector: PerParameterSelector,
) -> None:
    base = pd.DataFrame({"n": [1000] * 4, "gpu": ["A100"] * 4})
    huge = base.assign(density=[math.inf, 1e39, 3.4e38, 1e300])
    chosen = density_selector.select(huge)
    assert (chosen.nunique() == 1).all()


def test_constant_and_single_value_parameters(optima: pd.DataFrame) -> None:
    only = Parameter("only", "int", values=(7,))
    flat = Parameter("flat", "int", low=1, high=16)
    always = Parameter("always", "bool")
    table = optima.assign(only=7, flat=4, always=True)
    selector = PerParameterSelector().fit(
        table, [Parameter("n", "int", low=1, high=2**30, log=True)], [only, flat, always]
    )
    assert all(estimator.tree_.node_count == 1 for estimator in selector.trees_.values())
    chosen = selector.select(pd.DataFrame({"n": [1, 10**6, 2**40]}))
    assert chosen.to_dict("list") == {
        "only": [7, 7, 7],
        "flat": [4, 4, 4],
        "always": [True, True, True],
    }


def test_regressor_leaves_snap_to_nearest_domain_value() -> None:
    n = Parameter("n", "int", low=0, high=100)
    step = Parameter("step", "float", low=0.0, high=1.0, levels=5)  # 0, .25, .5, .75, 1
    table = pd.DataFrame({"n": [0, 0, 50, 50], "step": [0.1, 0.2, 0.6, 0.9]})
    selector = PerParameterSelector(max_depth=1).fit(table, [n], [step])
    # leaf means 0.15 and 0.75 -> 0.25 (nearer than 0.0) and 0.75
    assert selector.select(pd.DataFrame({"n": [0, 100]}))["step"].tolist() == [0.25, 0.75]


def test_fit_is_deterministic(optima: pd.DataFrame, selector: PerParameterSelector) -> None:
    again = PerParameterSelector(max_depth=8).fit(optima, selector.inputs_, selector.design_)
    table = boundary_inputs(selector, 500, np.random.default_rng(0))
    pd.testing.assert_frame_equal(again.select(table), selector.select(table))


def test_fit_rejects_bad_tables(optima: pd.DataFrame, params) -> None:
    inputs, design = [params.n, params.gpu], [params.block, params.algo]
    with pytest.raises(ValueError, match="lacks column"):
        PerParameterSelector().fit(optima.drop(columns="algo"), inputs, design)
    with pytest.raises(ValueError, match="not in its domain"):
        PerParameterSelector().fit(optima.assign(block=48), inputs, design)
    with pytest.raises(ValueError, match="not in its domain"):
        PerParameterSelector().fit(optima.assign(gpu="H100"), inputs, design)
    with pytest.raises(ValueError, match="unique"):
        PerParameterSelector().fit(optima, inputs, [params.block, params.block])
    with pytest.raises(ValueError, match="at least one"):
        PerParameterSelector().fit(optima, inputs, [])
    with pytest.raises(ValueError, match="finite"):
        density = Parameter("density", "float", low=0.0, high=1.0)
        PerParameterSelector().fit(optima.assign(density=np.nan), [density], design)


def test_select_rejects_unknown_inputs(selector: PerParameterSelector) -> None:
    with pytest.raises(ValueError, match="not in its domain"):
        selector.select(pd.DataFrame({"n": [10], "gpu": ["H100"]}))
    with pytest.raises(ValueError, match="lacks column"):
        selector.select(pd.DataFrame({"n": [10]}))
    with pytest.raises(RuntimeError, match="not fitted"):
        PerParameterSelector().select(pd.DataFrame({"n": [10]}))
