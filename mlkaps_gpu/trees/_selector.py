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

from mlkaps_gpu._numbers import plain
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.trees._model import (
    DecisionModel,
    LeafOutput,
    Ranking,
    TreeStructure,
    input_features,
)
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
        rank: bool = True,
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
            rank: rank the configurations per leaf (:meth:`rank_configurations`) now; a depth
                sweep fits every depth without and ranks only the one it chooses.
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
        return self.rank_configurations() if rank else self

    def rank_configurations(self) -> Self:
        """Add the per-leaf ranking of the configurations to the fitted model, where the
        selector kind has one (:class:`JointSelector`, decision 0048); here, nothing."""
        self._check_fitted()
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

    def to_dict(self) -> dict[str, Any]:
        """The fitted selector as JSON-ready data (no pickle): its class and hyperparameters,
        and its decision model (parameters, the trees' node arrays as scikit-learn built them,
        per-leaf value codes, the constraints and the fallback candidates).

        :meth:`from_dict` rebuilds a selector whose ``select`` answers and rendered header
        are identical (floats are written as ``repr``, which reads back exactly). The
        scikit-learn estimators themselves (``trees_``; a joint selector's ``tree_`` when it
        is one) are not kept: their node arrays are the model's trees.
        """
        return _to_dict(self)

    @staticmethod
    def from_dict(data: Any) -> Selector:
        """The selector :meth:`to_dict` wrote (a :class:`SelectorDataError`, naming the key,
        for anything else). Only data is read: nothing is imported or called by name."""
        return _from_dict(data)


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


# --------------------------------------------------------------------------- serialization
#: ``format`` of a selector written by :meth:`Selector.to_dict`.
SELECTOR_FORMAT = "mlkaps_gpu.selector"
#: Its version: a reader refuses other versions.
SELECTOR_VERSION = 1
#: Constructor arguments of each selector class kept in the data (hyperparameters).
_PARAMS = {
    "PerParameterSelector": ("max_depth", "min_samples_leaf", "random_state"),
    "JointSelector": (
        "max_depth",
        "min_samples_leaf",
        "random_state",
        "partition",
        "max_candidates",
        "regret_cap",
        "max_probes",
    ),
}


class SelectorDataError(ValueError):
    """Selector data (``to_dict``'s output, read back) is not a selector; the message names
    the key and what is wrong."""


def _to_dict(selector: Selector) -> dict[str, Any]:
    model = selector._check_fitted()
    name = type(selector).__name__
    if name not in _PARAMS:
        raise TypeError(f"{name}: only {sorted(_PARAMS)} can be written as data")
    data: dict[str, Any] = {
        "format": SELECTOR_FORMAT,
        "version": SELECTOR_VERSION,
        "class": name,
        "params": {key: getattr(selector, key) for key in _PARAMS[name]},
        "model": model_to_dict(model),
    }
    if name == "JointSelector":
        partition = selector._partition_structure()  # type: ignore[attr-defined]
        data["partition"] = _tree_to_dict(partition)
        leaves = getattr(selector, "leaves_", None)
        data["leaves"] = None if leaves is None else json_records(leaves.to_dict("records"))
    return data


def _from_dict(data: Any) -> Selector:
    from mlkaps_gpu.trees._joint import JointSelector

    _expect(data, dict, "selector")
    if data.get("format") != SELECTOR_FORMAT:
        raise SelectorDataError(f"'format' is {data.get('format')!r}, not {SELECTOR_FORMAT!r}")
    if data.get("version") != SELECTOR_VERSION:
        raise SelectorDataError(
            f"'version' is {data.get('version')!r}; this mlkaps_gpu reads version "
            f"{SELECTOR_VERSION}"
        )
    classes: dict[str, type[Selector]] = {
        "PerParameterSelector": PerParameterSelector,
        "JointSelector": JointSelector,
    }
    name = data.get("class")
    if name not in classes:
        raise SelectorDataError(f"'class' is {name!r}, not one of {sorted(classes)}")
    params = _expect(data.get("params"), dict, "params")
    unknown = sorted(set(params) - set(_PARAMS[name]))
    if unknown:
        raise SelectorDataError(f"params: unknown key(s) {unknown} of {name}")
    for key, value in params.items():
        if value is not None and not isinstance(value, (int, float, str)):
            raise SelectorDataError(f"params.{key}: {value!r} is not a number or a string")
    try:
        selector = classes[name](**params)
    except (TypeError, ValueError) as error:
        raise SelectorDataError(f"params: {error}") from None
    model = model_from_dict(data.get("model"))
    selector.inputs_ = model.inputs
    selector.design_ = model.design
    selector.model_ = model
    if name == "JointSelector":
        selector.tree_ = _tree_from_dict(data.get("partition"), "partition")  # type: ignore[attr-defined]
        leaves = data.get("leaves")
        if leaves is not None:
            _expect(leaves, list, "leaves")
            selector.leaves_ = pd.DataFrame(leaves)  # type: ignore[attr-defined]
    return selector


def json_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records with numpy scalars and arrays made plain JSON values."""
    return [{str(k): plain(v) for k, v in record.items()} for record in records]


def _expect(value: Any, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SelectorDataError(f"{where}: expected {names}, got {type(value).__name__}")
    return value


def parameter_to_dict(parameter: Parameter) -> dict[str, Any]:
    """A parameter as JSON-ready data (:func:`parameter_from_dict` reads it back)."""
    return {
        "name": parameter.name,
        "kind": parameter.kind,
        "values": None if parameter.values is None else [plain(v) for v in parameter.values],
        "low": plain(parameter.low),
        "high": plain(parameter.high),
        "log": bool(parameter.log),
        "levels": parameter.levels,
    }


def parameter_from_dict(data: Any, where: str = "parameter") -> Parameter:
    """The parameter :func:`parameter_to_dict` wrote (:class:`SelectorDataError` otherwise)."""
    _expect(data, dict, where)
    keys = {"name", "kind", "values", "low", "high", "log", "levels"}
    if set(data) != keys:
        raise SelectorDataError(f"{where}: keys {sorted(data)}, expected {sorted(keys)}")
    values = data["values"]
    if values is not None:
        _expect(values, list, f"{where}.values")
        for value in values:
            if not isinstance(value, (bool, int, float, str)):
                raise SelectorDataError(f"{where}.values: {value!r} is no plain value")
    for key in ("low", "high"):
        if data[key] is not None and (
            isinstance(data[key], bool) or not isinstance(data[key], (int, float))
        ):
            raise SelectorDataError(f"{where}.{key}: {data[key]!r} is not a number")
    _expect(data["log"], bool, f"{where}.log")
    if data["levels"] is not None:
        _expect(data["levels"], int, f"{where}.levels")
    try:
        return Parameter(
            name=data["name"],
            kind=data["kind"],
            values=None if values is None else tuple(values),
            low=data["low"],
            high=data["high"],
            log=data["log"],
            levels=data["levels"],
        )
    except (TypeError, ValueError) as error:
        raise SelectorDataError(f"{where}: {error}") from None


def _tree_to_dict(tree: TreeStructure) -> dict[str, Any]:
    return {
        "children_left": tree.children_left.tolist(),
        "children_right": tree.children_right.tolist(),
        "feature": tree.feature.tolist(),
        "threshold": [float(v) for v in tree.threshold],  # repr: exact in JSON
        "nan_goes_left": tree.nan_goes_left.tolist(),
    }


def _number_array(values: Any, where: str, kind: str) -> np.ndarray:
    _expect(values, list, where)
    allowed: tuple[type, ...] = {"int": (int,), "float": (int, float), "bool": (bool,)}[kind]
    for value in values:
        if not isinstance(value, allowed) or (kind != "bool" and isinstance(value, bool)):
            raise SelectorDataError(f"{where}: {value!r} is not a {kind}")
    dtype = {"int": np.int64, "float": np.float64, "bool": bool}[kind]
    try:
        return np.array(values, dtype=dtype)
    except OverflowError:
        raise SelectorDataError(f"{where}: a value is out of range") from None


def _tree_from_dict(data: Any, where: str) -> TreeStructure:
    _expect(data, dict, where)
    kinds = {
        "children_left": "int",
        "children_right": "int",
        "feature": "int",
        "threshold": "float",
        "nan_goes_left": "bool",
    }
    if set(data) != set(kinds):
        raise SelectorDataError(f"{where}: keys {sorted(data)}, expected {sorted(kinds)}")
    arrays = {key: _number_array(data[key], f"{where}.{key}", kind) for key, kind in kinds.items()}
    try:
        return TreeStructure(**arrays)
    except ValueError as error:
        raise SelectorDataError(f"{where}: {error}") from None


def model_to_dict(model: DecisionModel) -> dict[str, Any]:
    """A decision model as JSON-ready data: parameters, node arrays, leaf codes, validity."""
    design = list(model.design)
    validity = model.validity
    ranking = (
        {}
        if model.ranking is None
        else {
            "ranking": {
                "portfolio": model.ranking.portfolio.tolist(),
                "order": model.ranking.order.tolist(),
            }
        }
    )
    return {
        "inputs": [parameter_to_dict(p) for p in model.inputs],
        "design": [parameter_to_dict(p) for p in design],
        "trees": [_tree_to_dict(tree) for tree in model.trees],
        "tree_names": list(model.tree_names),
        "outputs": [{"tree": o.tree, "codes": o.codes.tolist()} for o in model.outputs],
        "description": model.description,
        "validity": None
        if validity is None
        else {
            "constraints": list(validity.constraints),
            "candidates": None if validity.candidates is None else validity.candidates.tolist(),
        },
        **ranking,
    }


def model_from_dict(data: Any) -> DecisionModel:
    """The model :func:`model_to_dict` wrote; :class:`SelectorDataError` naming the key for
    anything else (wrong types, arrays that are no tree, codes outside a domain...)."""
    _expect(data, dict, "model")
    keys = {"inputs", "design", "trees", "tree_names", "outputs", "description", "validity"}
    if set(data) - {"ranking"} != keys:
        raise SelectorDataError(
            f"model: keys {sorted(data)}, expected {sorted(keys)} (and 'ranking' optionally)"
        )
    inputs = tuple(
        parameter_from_dict(p, f"model.inputs[{i}]")
        for i, p in enumerate(_expect(data["inputs"], list, "model.inputs"))
    )
    design = tuple(
        parameter_from_dict(p, f"model.design[{i}]")
        for i, p in enumerate(_expect(data["design"], list, "model.design"))
    )
    trees = tuple(
        _tree_from_dict(t, f"model.trees[{i}]")
        for i, t in enumerate(_expect(data["trees"], list, "model.trees"))
    )
    names = _expect(data["tree_names"], list, "model.tree_names")
    if not all(isinstance(n, str) for n in names):
        raise SelectorDataError("model.tree_names: expected strings")
    outputs_data = _expect(data["outputs"], list, "model.outputs")
    if len(outputs_data) != len(design):
        raise SelectorDataError(
            f"model.outputs: {len(outputs_data)} outputs for {len(design)} design parameters"
        )
    outputs = []
    for index, (output, parameter) in enumerate(zip(outputs_data, design, strict=True)):
        where = f"model.outputs[{index}]"
        _expect(output, dict, where)
        if set(output) != {"tree", "codes"}:
            raise SelectorDataError(f"{where}: keys {sorted(output)}, expected ['codes', 'tree']")
        tree = _expect(output["tree"], int, f"{where}.tree")
        codes = _number_array(output["codes"], f"{where}.codes", "int")
        try:
            outputs.append(LeafOutput(parameter, tree, codes))
        except ValueError as error:
            raise SelectorDataError(f"{where}: {error}") from None
    description = _expect(data["description"], str, "model.description")
    validity = None
    if data["validity"] is not None:
        entry = _expect(data["validity"], dict, "model.validity")
        if set(entry) != {"constraints", "candidates"}:
            raise SelectorDataError(
                f"model.validity: keys {sorted(entry)}, expected ['candidates', 'constraints']"
            )
        constraints = _expect(entry["constraints"], list, "model.validity.constraints")
        if not all(isinstance(c, str) for c in constraints):
            raise SelectorDataError("model.validity.constraints: expected strings")
        candidates = None
        if entry["candidates"] is not None:
            rows = _expect(entry["candidates"], list, "model.validity.candidates")
            candidates = np.array(
                [_number_array(r, "model.validity.candidates", "int") for r in rows]
            )
        try:
            validity = Validity(inputs, design, tuple(constraints), candidates)
        except ValueError as error:  # SpaceError, ConstraintError included
            raise SelectorDataError(f"model.validity: {error}") from None
    ranking = _ranking_from_dict(data["ranking"]) if "ranking" in data else None
    try:
        return DecisionModel(
            inputs=inputs,
            trees=trees,
            tree_names=tuple(names),
            outputs=tuple(outputs),
            description=description,
            validity=validity,
            ranking=ranking,
        )
    except ValueError as error:
        raise SelectorDataError(f"model: {error}") from None


def _ranking_from_dict(data: Any) -> Ranking:
    """The ranking :func:`model_to_dict` wrote (:class:`SelectorDataError` for anything else)."""
    _expect(data, dict, "model.ranking")
    if set(data) != {"portfolio", "order"}:
        raise SelectorDataError(
            f"model.ranking: keys {sorted(data)}, expected ['order', 'portfolio']"
        )
    rows = {
        key: [
            _number_array(row, f"model.ranking.{key}", "int")
            for row in _expect(data[key], list, f"model.ranking.{key}")
        ]
        for key in ("portfolio", "order")
    }
    try:  # rows of unequal length are a ValueError too
        return Ranking(np.array(rows["portfolio"]), np.array(rows["order"]))
    except ValueError as error:
        raise SelectorDataError(f"model.ranking: {error}") from None
