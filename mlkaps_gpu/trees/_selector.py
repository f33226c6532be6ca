"""Selectors: decision trees that map input values to the optimal configuration.

Life cycle of a :class:`Selector`: ``fit(optima, inputs, design, space=..., score=...)`` checks
the table, builds the float64 feature matrix once and calls the subclass's
:meth:`Selector._fit_model`, which trains its trees and returns a
:class:`~mlkaps_gpu.trees._model.DecisionModel`. Given a ``space``, ``fit`` then attaches the
space's constraints (a :class:`~mlkaps_gpu.trees._validity.Validity`: check and fallback at run
time) and stores the model as ``model_``. ``select`` and
:func:`mlkaps_gpu.codegen.render_header` then work from that model only, so the Python answers
and the generated header come from the same arrays.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import pandas as pd
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.trees._model import DecisionModel, LeafOutput, TreeStructure, input_features
from mlkaps_gpu.trees._regret import RegretOracle, Score
from mlkaps_gpu.trees._validity import Validity


@dataclass(frozen=True)
class FitContext:
    """What a selector may use besides the optima: the space, the objective predictor, and a
    regret oracle over the optima's points shared between fits (a depth sweep passes one)."""

    space: Space | None = None
    score: Score | None = None
    oracle: RegretOracle | None = None


def tool_versions() -> dict[str, str]:
    """Versions written into generated headers."""
    import sklearn

    import mlkaps_gpu

    return {
        "mlkaps_gpu": str(mlkaps_gpu.__version__),
        "scikit-learn": str(sklearn.__version__),
        "numpy": str(np.__version__),
    }


def snap_to_domain(values: np.ndarray, parameter: Parameter) -> np.ndarray:
    """Code of the nearest domain value of each value (ties go to the smaller value)."""
    domain = parameter.domain_values().astype(np.float64)
    order = np.argsort(domain, kind="stable")
    ordered = domain[order]
    values = np.asarray(values, dtype=np.float64)
    upper = np.clip(np.searchsorted(ordered, values), 0, len(ordered) - 1)
    lower = np.clip(upper - 1, 0, len(ordered) - 1)
    take_lower = np.abs(values - ordered[lower]) <= np.abs(ordered[upper] - values)
    return order[np.where(take_lower, lower, upper)].astype(np.int64)


def uses_classifier(parameter: Parameter) -> bool:
    """Categorical, bool and value-list parameters are classified (outputs are exact values)."""
    return parameter.kind in ("categorical", "bool") or parameter.values is not None


def design_codes(optima: pd.DataFrame, parameter: Parameter) -> np.ndarray:
    """Domain codes of a design column; every value must be one of ``domain_values()``."""
    codes = parameter.codes(optima[parameter.name])
    if np.any(codes < 0):
        bad = np.asarray(optima[parameter.name])[codes < 0][:5].tolist()
        raise ValueError(
            f"design column '{parameter.name}': values {bad} are not in its domain "
            f"{parameter.domain_values().tolist()[:12]}"
        )
    return codes


def _check_fit_arguments(
    optima: pd.DataFrame,
    inputs: tuple[Parameter, ...],
    design: tuple[Parameter, ...],
    space: Space | None,
) -> np.ndarray:
    """Check :meth:`Selector.fit`'s arguments; returns the optima's float64 feature matrix."""
    for parameter in (*inputs, *design):
        if not isinstance(parameter, Parameter):
            raise TypeError(f"expected Parameter objects, got {type(parameter).__name__}")
    if not inputs or not design:
        raise ValueError("a selector needs at least one input and one design parameter")
    names = [p.name for p in (*inputs, *design)]
    if len(set(names)) != len(names):
        raise ValueError(f"parameter names must be unique across inputs and design: {names}")
    missing = [name for name in names if name not in optima.columns]
    if missing:
        raise ValueError(f"optima table lacks column(s) {missing}")
    if len(optima) == 0:
        raise ValueError("optima table is empty")
    features = input_features(optima, inputs)
    if not np.all(np.isfinite(features)):
        raise ValueError("input columns of the optima table must be finite (no NaN or inf)")
    if space is not None:
        if [p.name for p in inputs] != space.input_names or [
            p.name for p in design
        ] != space.design_names:
            raise ValueError(
                f"the space's parameters ({space.input_names} / {space.design_names}) "
                f"differ from those given ({[p.name for p in inputs]} / "
                f"{[p.name for p in design]})"
            )
    return features


class Selector(abc.ABC):
    """Base class of tree selectors; subclasses implement :meth:`_fit_model`.

    Attributes (after ``fit``):
        inputs_: the input parameters (feature order).
        design_: the design parameters (output order).
        model_: the fitted :class:`DecisionModel`.
    """

    inputs_: tuple[Parameter, ...]
    design_: tuple[Parameter, ...]
    model_: DecisionModel

    def fit(
        self,
        optima: pd.DataFrame,
        inputs: Sequence[Parameter],
        design: Sequence[Parameter],
        *,
        space: Space | None = None,
        score: Score | None = None,
        oracle: RegretOracle | None = None,
    ) -> Self:
        """Learn the optimal configuration of each input point.

        Args:
            optima: one row per input point: its input values and its optimal configuration.
            inputs: input parameters (features), in the order of the C select arguments.
            design: design parameters (outputs), in the order of the C struct fields.
            space: the search space (its inputs and design must be ``inputs`` and ``design``);
                its constraints are then checked at run time, with a fallback (see
                :mod:`mlkaps_gpu.trees._validity`). Without it there is no check.
            score: predicted objective of rows of inputs + design (selectors that weigh
                configurations by it, such as :class:`JointSelector`, need it).
            oracle: a :class:`RegretOracle` built on these optima, space and score, to reuse
                its cached predictions (optional; a depth sweep passes one).
        """
        inputs, design = tuple(inputs), tuple(design)
        features = _check_fit_arguments(optima, inputs, design, space)
        self.inputs_, self.design_ = inputs, design
        context = FitContext(space=space, score=score, oracle=oracle)
        model = self._fit_model(features, optima, context)
        if space is not None:
            codes = np.column_stack([design_codes(optima, p) for p in design])
            validity = Validity.build(
                inputs, design, [c.source for c in space.constraints], optima_codes=codes
            )
            model = dataclasses.replace(model, validity=validity)
        self.model_ = model
        return self

    @abc.abstractmethod
    def _fit_model(
        self, features: np.ndarray, optima: pd.DataFrame, context: FitContext
    ) -> DecisionModel:
        """Train on the float64 feature matrix; return the model without its validity
        (``inputs_`` and ``design_`` are set)."""

    def fitted_model(self) -> DecisionModel:
        """The fitted decision model (trees and per-leaf outputs); raises if not fitted."""
        return self._check_fitted()

    def grown_depth(self) -> int:
        """Depth of the trees as grown, before any simplification of the fitted model. Where it
        is below ``max_depth`` the growth stopped on its own, and any deeper limit grows the
        same trees."""
        return max(tree.depth for tree in self._check_fitted().trees)

    def _check_fitted(self) -> DecisionModel:
        model = getattr(self, "model_", None)
        if model is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit() first")
        return model

    def select(self, inputs_table: pd.DataFrame) -> pd.DataFrame:
        """The selected configuration of every row (one column per design parameter).

        Features are rounded to float32 and compared ``<=`` with the float64 thresholds, as
        scikit-learn does; a NaN float input goes where scikit-learn sends missing values
        (``missing_go_to_left``), as does the generated header. With a space given to ``fit``,
        the trees' configuration is then checked against the constraints at the clamped inputs
        and replaced by the nearest valid one where it fails (:mod:`._validity`), as the
        header's ``<prefix>_select`` does.
        """
        return self._check_fitted().predict(inputs_table)


class PerParameterSelector(Selector):
    """One decision tree per design parameter.

    Categorical, bool and value-list parameters use a ``DecisionTreeClassifier`` (leaves hold
    exact values); range parameters a ``DecisionTreeRegressor`` whose leaf means are snapped
    once to the nearest value of ``domain_values()``.

    Attributes (after ``fit``):
        trees_: design parameter name -> fitted scikit-learn estimator.
    """

    def __init__(
        self, *, max_depth: int | None = 8, min_samples_leaf: int = 1, random_state: int = 0
    ) -> None:
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state

    def _fit_model(
        self, features: np.ndarray, optima: pd.DataFrame, context: FitContext
    ) -> DecisionModel:
        options = {
            "max_depth": self.max_depth,
            "min_samples_leaf": self.min_samples_leaf,
            "random_state": self.random_state,
        }
        self.trees_: dict[str, Any] = {}
        trees, outputs = [], []
        for index, parameter in enumerate(self.design_):
            estimator: Any
            if uses_classifier(parameter):
                estimator = DecisionTreeClassifier(**options)
                estimator.fit(features, design_codes(optima, parameter))
                structure = TreeStructure.from_sklearn(estimator)
                counts = estimator.tree_.value[structure.leaf_nodes, 0, :]
                codes = estimator.classes_[np.argmax(counts, axis=1)]
            else:
                target = parameter.numeric(optima[parameter.name])
                if not np.all(np.isfinite(target)):
                    raise ValueError(f"design column '{parameter.name}' is not finite")
                estimator = DecisionTreeRegressor(**options)
                estimator.fit(features, target)
                structure = TreeStructure.from_sklearn(estimator)
                codes = snap_to_domain(estimator.tree_.value[structure.leaf_nodes, 0, 0], parameter)
            self.trees_[parameter.name] = estimator
            trees.append(structure)
            outputs.append(LeafOutput(parameter, index, codes))
        return DecisionModel(
            inputs=self.inputs_,
            trees=tuple(trees),
            tree_names=tuple(p.name for p in self.design_),
            outputs=tuple(outputs),
            description=(
                f"PerParameterSelector(max_depth={self.max_depth}, min_samples_leaf="
                f"{self.min_samples_leaf}, random_state={self.random_state}), one tree per"
                " design parameter"
            ),
        )
