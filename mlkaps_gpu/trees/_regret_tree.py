"""A decision tree grown to minimise the total regret of one configuration per leaf.

Given per point the relative regret of each of K candidate configurations (a points x K
matrix), the cost of a set of points is ``min_c sum_p regret[p, c]``: the total regret of the
best single configuration for them. :func:`grow_regret_tree` splits greedily, depth first, on the
split that minimises the summed cost of the two children (found for every feature and position
at once with prefix sums). A node whose cost is not zero is split even when the best split does
not lower the cost yet (a greedy tree cannot see that two splits together would), up to
``max_depth`` and as long as each child keeps ``min_samples_leaf`` points; sibling leaves that
end up with the same configuration are merged afterwards (:func:`merge_equal_leaves`).

Splits follow scikit-learn's conventions exactly, so the tree is walked like a scikit-learn tree
(and written to C the same way): features are rounded to float32, a threshold is the midpoint
``a / 2 + b / 2`` of two consecutive distinct float32 feature values (exact in float64), a row
goes left when ``float32(x) <= threshold``, and a NaN goes to the child that received more
points (no NaN is ever seen in training).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlkaps_gpu.trees._model import TreeStructure

#: A node whose best configuration has at most this total regret is not split.
_ZERO_COST = 1e-12


@dataclass
class _Split:
    feature: int
    threshold: float
    left: np.ndarray  # point indices
    right: np.ndarray
    cost: float


def node_cost(regret: np.ndarray) -> float:
    """Total regret of the best single column for these rows."""
    return float(regret.sum(axis=0).min()) if len(regret) else 0.0


def best_split(
    features32: np.ndarray, regret: np.ndarray, points: np.ndarray, min_samples_leaf: int
) -> _Split | None:
    """The split of ``points`` with the least summed child cost (ties: first feature, lowest
    threshold), or None where none is allowed."""
    best: _Split | None = None
    n = len(points)
    for feature in range(features32.shape[1]):
        values = features32[points, feature]
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        prefix = np.cumsum(regret[points[order]], axis=0)
        total = prefix[-1]
        # position i splits ordered[:i] | ordered[i:]
        positions = np.arange(max(1, min_samples_leaf), n - max(1, min_samples_leaf) + 1)
        positions = positions[ordered[positions - 1] < ordered[np.minimum(positions, n - 1)]]
        positions = positions[positions < n]
        if len(positions) == 0:
            continue
        left = prefix[positions - 1]
        costs = left.min(axis=1) + (total - left).min(axis=1)
        index = int(np.argmin(costs))
        if best is None or costs[index] < best.cost:
            position = int(positions[index])
            threshold = ordered[position - 1] / 2.0 + ordered[position] / 2.0
            if threshold == ordered[position] or not np.isfinite(threshold):
                threshold = ordered[position - 1]  # as scikit-learn guards the midpoint
            best = _Split(
                feature=feature,
                threshold=float(threshold),
                left=points[order[:position]],
                right=points[order[position:]],
                cost=float(costs[index]),
            )
    return best


def grow_regret_tree(
    features: np.ndarray,
    regret: np.ndarray,
    *,
    max_depth: int | None,
    min_samples_leaf: int = 1,
) -> TreeStructure:
    """Grow the tree (see the module docstring) on a float64 feature matrix."""
    features = np.asarray(features, dtype=np.float64)
    regret = np.asarray(regret, dtype=np.float64)
    if len(features) != len(regret) or len(features) == 0:
        raise ValueError("features and regret need the same, non-zero, number of rows")
    features32 = features.astype(np.float32).astype(np.float64)
    left: list[int] = []
    right: list[int] = []
    feature: list[int] = []
    threshold: list[float] = []
    nan_left: list[bool] = []

    def new_node() -> int:
        left.append(-1)
        right.append(-1)
        feature.append(-2)
        threshold.append(-2.0)
        nan_left.append(False)
        return len(left) - 1

    def grow(points: np.ndarray, depth: int) -> int:
        node = new_node()
        if max_depth is not None and depth >= max_depth:
            return node
        cost = node_cost(regret[points])
        if cost <= _ZERO_COST:
            return node
        split = best_split(features32, regret, points, min_samples_leaf)
        if split is None:
            return node
        feature[node], threshold[node] = split.feature, split.threshold
        nan_left[node] = len(split.left) > len(split.right)
        left[node] = grow(split.left, depth + 1)
        right[node] = grow(split.right, depth + 1)
        return node

    grow(np.arange(len(features)), 0)
    return TreeStructure(
        children_left=np.array(left),
        children_right=np.array(right),
        feature=np.array(feature),
        threshold=np.array(threshold),
        nan_goes_left=np.array(nan_left),
    )


def merge_equal_leaves(
    tree: TreeStructure, leaf_codes: np.ndarray
) -> tuple[TreeStructure, np.ndarray]:
    """Replace every split whose two children are leaves holding the same row of
    ``leaf_codes`` (per leaf, in leaf-index order) by one leaf, until none is left.

    Returns the smaller tree (nodes renumbered in the same depth-first order) and its
    per-leaf rows."""
    leaf_index = {int(node): index for index, node in enumerate(tree.leaf_nodes)}
    value: dict[int, np.ndarray] = {node: leaf_codes[i] for node, i in leaf_index.items()}

    def collapse(node: int) -> bool:
        """Merge below ``node``; True when ``node`` is (now) a leaf."""
        left, right = int(tree.children_left[node]), int(tree.children_right[node])
        if left == -1:
            return True
        left_leaf, right_leaf = collapse(left), collapse(right)
        if left_leaf and right_leaf and np.array_equal(value[left], value[right]):
            value[node] = value[left]
            merged.add(node)
            return True
        return False

    merged: set[int] = set()
    collapse(0)
    lefts: list[int] = []
    rights: list[int] = []
    features: list[int] = []
    thresholds: list[float] = []
    nan_left: list[bool] = []
    rows: list[np.ndarray] = []

    def copy(node: int) -> int:
        new = len(lefts)
        lefts.append(-1)
        rights.append(-1)
        if node in merged or int(tree.children_left[node]) == -1:
            features.append(-2)
            thresholds.append(-2.0)
            nan_left.append(False)
            rows.append(value[node])
            return new
        features.append(int(tree.feature[node]))
        thresholds.append(float(tree.threshold[node]))
        nan_left.append(bool(tree.nan_goes_left[node]))
        lefts[new] = copy(int(tree.children_left[node]))
        rights[new] = copy(int(tree.children_right[node]))
        return new

    copy(0)
    smaller = TreeStructure(
        children_left=np.array(lefts),
        children_right=np.array(rights),
        feature=np.array(features),
        threshold=np.array(thresholds),
        nan_goes_left=np.array(nan_left),
    )
    return smaller, np.array(rows, dtype=np.int64).reshape(len(rows), leaf_codes.shape[1])
