"""The fitted decision model shared by the selectors, the C code generator and the verifier.

A :class:`DecisionModel` is a list of binary trees (:class:`TreeStructure`, read from
scikit-learn's ``tree_``) and, per design parameter, a per-leaf table of value codes
(:class:`LeafOutput`). A per-parameter selector has one tree per design parameter; a joint
selector would have one tree shared by every output. Python prediction (:meth:`DecisionModel.
predict`) and the generated C walk the very same arrays, so they agree by construction.

Comparison semantics (those of scikit-learn's ``apply``): a feature is rounded to float32, then
``feature <= threshold`` (threshold in float64) sends a row left. A NaN feature (float inputs
only) goes to the child scikit-learn recorded in ``missing_go_to_left``; for trees trained
without missing values that is the child that received more training samples.

A model may carry a :class:`~mlkaps_gpu.trees._validity.Validity` (the space's constraints):
then ``predict`` checks the trees' configuration at the clamped inputs and replaces an invalid
one by the nearest valid configuration, exactly as the generated header does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.space import Parameter
from mlkaps_gpu.trees._validity import Validity

#: Largest finite float32, as a double.
FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True, eq=False)
class TreeStructure:
    """A binary decision tree as flat node arrays (scikit-learn's layout, node 0 is the root).

    Leaves have ``children_left == -1``. Leaves are numbered 0, 1, ... in increasing node id
    (depth-first, left first); that *leaf index* is what the generated leaf functions return.
    """

    children_left: np.ndarray
    children_right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    nan_goes_left: np.ndarray

    def __post_init__(self) -> None:
        arrays = {
            "children_left": np.asarray(self.children_left, dtype=np.int64),
            "children_right": np.asarray(self.children_right, dtype=np.int64),
            "feature": np.asarray(self.feature, dtype=np.int64),
            "threshold": np.asarray(self.threshold, dtype=np.float64),
            "nan_goes_left": np.asarray(self.nan_goes_left, dtype=bool),
        }
        sizes = {len(a) for a in arrays.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise ValueError(f"tree node arrays must be non-empty and of equal length: {sizes}")
        for name, array in arrays.items():
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        n_nodes = len(self.children_left)
        split = self.children_left != -1
        children = np.concatenate([self.children_left[split], self.children_right[split]])
        if (
            np.any((self.children_right == -1) != ~split)
            or np.any(children <= 0)
            or np.any(children >= n_nodes)
            or len(np.unique(children)) != len(children)
        ):
            raise ValueError("tree node arrays do not describe a binary tree rooted at node 0")
        if np.any(self.feature[split] < 0):
            raise ValueError("a split node has a negative feature index")
        thresholds = self.threshold[split]
        if not np.all(np.abs(thresholds) < FLOAT32_MAX):
            raise ValueError("split thresholds must be finite and inside the float32 range")

    @classmethod
    def from_sklearn(cls, estimator: Any) -> TreeStructure:
        """Read the node arrays of a fitted scikit-learn decision tree."""
        tree = estimator.tree_
        return cls(
            children_left=tree.children_left,
            children_right=tree.children_right,
            feature=tree.feature,
            threshold=tree.threshold,
            nan_goes_left=tree.missing_go_to_left,
        )

    @property
    def leaf_nodes(self) -> np.ndarray:
        """Node ids of the leaves, in leaf-index order."""
        return np.flatnonzero(self.children_left == -1)

    @property
    def n_leaves(self) -> int:
        """Leaves of the tree."""
        return int(np.count_nonzero(self.children_left == -1))

    @property
    def depth(self) -> int:
        """Longest root-to-leaf path, in splits (0 for a single leaf)."""
        deepest, stack = 0, [(0, 0)]
        while stack:
            node, depth = stack.pop()
            deepest = max(deepest, depth)
            if self.children_left[node] != -1:
                stack.append((int(self.children_left[node]), depth + 1))
                stack.append((int(self.children_right[node]), depth + 1))
        return deepest

    @property
    def n_features_used(self) -> int:
        """One more than the highest feature index a split uses (0 for a single leaf): the
        inputs the tree needs."""
        split = self.children_left != -1
        return int(self.feature[split].max()) + 1 if split.any() else 0

    def apply(self, features: np.ndarray) -> np.ndarray:
        """Leaf index of every row of a float64 feature matrix (rounded to float32 here)."""
        with np.errstate(over="ignore"):
            rounded = np.asarray(features, dtype=np.float64).astype(np.float32)
        rounded = rounded.astype(np.float64)
        node = np.zeros(len(rounded), dtype=np.int64)
        rows = np.arange(len(rounded))
        active = self.children_left[node] != -1
        while active.any():
            at = node[active]
            value = rounded[rows[active], self.feature[at]]
            go_left = (value <= self.threshold[at]) | (np.isnan(value) & self.nan_goes_left[at])
            node[active] = np.where(go_left, self.children_left[at], self.children_right[at])
            active = self.children_left[node] != -1
        leaf_index = np.full(len(self.children_left), -1, dtype=np.int64)
        leaf_index[self.leaf_nodes] = np.arange(self.n_leaves)
        return leaf_index[node]


@dataclass(frozen=True, eq=False)
class LeafOutput:
    """The value of one design parameter at every leaf of one tree.

    Attributes:
        parameter: the design parameter.
        tree: index of the tree (in :attr:`DecisionModel.trees`) whose leaves this reads.
        codes: per leaf, the index of the value in ``parameter.domain_values()``.
    """

    parameter: Parameter
    tree: int
    codes: np.ndarray

    def __post_init__(self) -> None:
        codes = np.asarray(self.codes, dtype=np.int64)
        if codes.ndim != 1 or np.any(codes < 0) or np.any(codes >= self.parameter.n_values):
            raise ValueError(
                f"leaf codes of '{self.parameter.name}' must index its "
                f"{self.parameter.n_values} domain values"
            )
        codes.setflags(write=False)
        object.__setattr__(self, "codes", codes)

    def values(self) -> np.ndarray:
        """The value at each leaf."""
        return self.parameter.domain_values()[self.codes]


@dataclass(frozen=True, eq=False)
class Ranking:
    """The configurations a one-tree model can return, ranked per leaf: what a library walks
    when it cannot run the first answer at an input (a kernel it did not generate there, as
    PyTorch's AutoHeuristic walks its ranked choices).

    Attributes:
        portfolio: distinct configurations (rows of design codes, in output order).
        order: per leaf of the model's tree, a permutation of the portfolio's rows, best first.
    """

    portfolio: np.ndarray
    order: np.ndarray

    def __post_init__(self) -> None:
        portfolio = np.asarray(self.portfolio, dtype=np.int64)
        order = np.asarray(self.order, dtype=np.int64)
        if portfolio.ndim != 2 or len(portfolio) == 0 or portfolio.shape[1] == 0:
            raise ValueError("a ranking's portfolio must be a non-empty matrix of design codes")
        if len(np.unique(portfolio, axis=0)) != len(portfolio):
            raise ValueError("a ranking's portfolio holds a configuration twice")
        if order.ndim != 2 or order.shape[1] != len(portfolio) or len(order) == 0:
            raise ValueError(
                f"a ranking's order must have one row per leaf of {len(portfolio)} indices"
            )
        if not np.array_equal(
            np.sort(order, axis=1), np.tile(np.arange(len(portfolio)), (len(order), 1))
        ):
            raise ValueError("each row of a ranking's order must be a permutation of the portfolio")
        for name, array in (("portfolio", portfolio), ("order", order)):
            array.setflags(write=False)
            object.__setattr__(self, name, array)


@dataclass(frozen=True, eq=False)
class DecisionModel:
    """Trees plus per-leaf output tables: everything the header and ``select`` need.

    Attributes:
        inputs: input parameters, in feature order.
        trees: the decision trees.
        tree_names: a label per tree (names its C leaf function).
        outputs: one per design parameter, in the order of the configuration struct.
        description: one line for the header comment (which selector built it, and how).
        validity: the constraints checked after the trees, with their fallback (None: the
            trees' answer is returned as is and the header has no validity code).
        ranking: a one-tree model's configurations ranked per leaf (:class:`Ranking`; None:
            the header has no ``<prefix>_ranked``).
    """

    inputs: tuple[Parameter, ...]
    trees: tuple[TreeStructure, ...]
    tree_names: tuple[str, ...]
    outputs: tuple[LeafOutput, ...]
    description: str = ""
    validity: Validity | None = None
    ranking: Ranking | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "trees", tuple(self.trees))
        object.__setattr__(self, "tree_names", tuple(self.tree_names))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not self.inputs:
            raise ValueError("a decision model needs at least one input parameter")
        if not self.outputs:
            raise ValueError("a decision model needs at least one design parameter")
        if len(self.tree_names) != len(self.trees):
            raise ValueError("give one name per tree")
        names = [p.name for p in self.inputs] + [o.parameter.name for o in self.outputs]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"parameter names used twice (inputs and design): {duplicates}")
        for index, tree in enumerate(self.trees):
            if tree.n_features_used > len(self.inputs):
                raise ValueError(
                    f"tree {self.tree_names[index]!r} splits on feature "
                    f"{tree.n_features_used - 1}, but there are {len(self.inputs)} inputs"
                )
        for output in self.outputs:
            if not 0 <= output.tree < len(self.trees):
                raise ValueError(f"output '{output.parameter.name}' refers to no tree")
            if len(output.codes) != self.trees[output.tree].n_leaves:
                raise ValueError(
                    f"output '{output.parameter.name}' has {len(output.codes)} leaf values, "
                    f"its tree has {self.trees[output.tree].n_leaves} leaves"
                )
        if self.validity is not None and (
            [p.name for p in self.validity.inputs] != [p.name for p in self.inputs]
            or [p.name for p in self.validity.design] != [p.name for p in self.design]
        ):
            raise ValueError("the validity's parameters differ from the model's")
        if self.ranking is not None:
            self._check_ranking(self.ranking)

    def _check_ranking(self, ranking: Ranking) -> None:
        if len(self.trees) != 1:
            raise ValueError("only a one-tree model can rank its configurations per leaf")
        if len(ranking.order) != self.trees[0].n_leaves:
            raise ValueError(
                f"the ranking has {len(ranking.order)} leaves, the tree {self.trees[0].n_leaves}"
            )
        if ranking.portfolio.shape[1] != len(self.outputs):
            raise ValueError(
                f"the ranking's configurations have {ranking.portfolio.shape[1]} codes, the "
                f"model {len(self.outputs)} design parameters"
            )
        for column, output in enumerate(self.outputs):
            codes = ranking.portfolio[:, column]
            if np.any(codes < 0) or np.any(codes >= output.parameter.n_values):
                raise ValueError(
                    f"the ranking's codes of '{output.parameter.name}' must index its "
                    f"{output.parameter.n_values} domain values"
                )

    @property
    def design(self) -> tuple[Parameter, ...]:
        """The design parameters the model chooses, in the order of its outputs."""
        return tuple(output.parameter for output in self.outputs)

    def features(self, table: pd.DataFrame) -> np.ndarray:
        """The float64 feature matrix of an input table (checked: see :func:`input_features`)."""
        return input_features(table, self.inputs)

    def predict_codes(self, features: np.ndarray) -> list[np.ndarray]:
        """Per output, the domain code of every row, as the trees answer (no validity check)."""
        leaves = [tree.apply(features) for tree in self.trees]
        return [output.codes[leaves[output.tree]] for output in self.outputs]

    def select_codes(self, table: pd.DataFrame, *, fallback: bool = True) -> np.ndarray:
        """Design codes (rows x outputs) of an input table: the trees' answer, then, with
        ``fallback`` and a validity, the check and the fallback of the generated header."""
        codes = np.column_stack(self.predict_codes(self.features(table))).astype(np.int64)
        codes = codes.reshape(len(table), len(self.outputs))
        if fallback and self.validity is not None:
            codes = self.validity.apply(table, codes)
        return codes

    def ranked_codes(self, table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """What the header's ``<prefix>_ranked`` writes for every row of an input table.

        The first configuration is ``select``'s answer (checked, with the fallback). The
        others follow in the order the row's leaf ranks the portfolio, each once, without the
        first and, where the header checks constraints, without those that fail at the
        clamped inputs.

        Returns:
            ``(codes, counts)``: codes (rows x (portfolio + 1) x outputs, -1 past a row's
            count) and the configurations per row.

        Raises:
            ValueError: the model has no ranking.
        """
        ranking = self.ranking
        if ranking is None:
            raise ValueError("this model ranks no configurations (only a joint tree does)")
        first = self.select_codes(table)
        n_rows, n_ranked = len(first), len(ranking.portfolio)
        leaves = self.trees[0].apply(self.features(table))
        ranked = ranking.portfolio[ranking.order[leaves]]  # rows x K x outputs
        keep = np.any(ranked != first[:, None, :], axis=2)
        validity = self.validity
        if validity is not None and validity.constraints and validity.constrained_design:
            clamped = {
                name: np.repeat(column, n_ranked)
                for name, column in validity.clamped_inputs(table).items()
            }
            flat = ranked.reshape(n_rows * n_ranked, -1)
            keep &= validity.satisfied(clamped, flat).reshape(n_rows, n_ranked)
        codes = np.full((n_rows, n_ranked + 1, len(self.outputs)), -1, dtype=np.int64)
        codes[:, 0] = first
        rows, columns = np.nonzero(keep)
        position = np.cumsum(keep, axis=1)
        codes[rows, position[rows, columns]] = ranked[rows, columns]
        return codes, 1 + keep.sum(axis=1)

    def predict(self, table: pd.DataFrame, *, fallback: bool = True) -> pd.DataFrame:
        """One column per design parameter, in its dtype (int64, float64, bool, object str).

        Args:
            table: one column per input parameter.
            fallback: apply the validity check and fallback (what the header's ``select``
                does); ``False`` gives the trees' raw answer (the header's ``tree_select``).
        """
        codes = self.select_codes(table, fallback=fallback)
        columns = {
            output.parameter.name: pd.Series(
                output.parameter.domain_values()[codes[:, index]],
                index=table.index,
                dtype=output.parameter.dtype,
            )
            for index, output in enumerate(self.outputs)
        }
        return pd.DataFrame(columns, index=table.index)


def input_features(table: pd.DataFrame, inputs: Sequence[Parameter]) -> np.ndarray:
    """``[p.numeric(table[p.name]) for p in inputs]`` as a float64 matrix, one row per row.

    Raises:
        ValueError: a column is missing, a categorical or bool value is not in its domain, or
            an int/bool/categorical feature is NaN (only float inputs may be NaN).
    """
    missing = [p.name for p in inputs if p.name not in table.columns]
    if missing:
        raise ValueError(f"input table lacks column(s) {missing}; it has {list(table.columns)}")
    columns = []
    for parameter in inputs:
        column = table[parameter.name]
        if parameter.kind in ("categorical", "bool"):
            codes = parameter.codes(column)
            if np.any(codes < 0):
                bad = np.asarray(column)[codes < 0][:5].tolist()
                raise ValueError(
                    f"input '{parameter.name}': values {bad} are not in its domain "
                    f"{parameter.domain_values().tolist()}"
                )
        values = parameter.numeric(column)
        if parameter.kind != "float" and np.any(np.isnan(values)):
            raise ValueError(f"input '{parameter.name}' ({parameter.kind}) holds NaN")
        columns.append(values)
    return np.column_stack(columns).astype(np.float64) if columns else np.empty((len(table), 0))
