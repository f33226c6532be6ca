"""The region of the input domain each leaf of a tree answers for, and probe points inside it.

A leaf's region is a box: per input, ``lower < float32(x) <= upper`` where the bounds are the
thresholds on the path to the leaf (``-inf`` / ``+inf`` where the path does not test the input),
intersected with the input's domain. Because float32 rounding is monotone, the doubles in
``(lower, upper]`` after rounding form an interval of doubles whose ends are computed exactly here
(:func:`largest_at_most`), so the probes include the region's true extreme values: a constraint
monotone in each input (``block <= n``) holds on the whole region when it holds at its corners.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mlkaps_gpu.space import Parameter
from mlkaps_gpu.trees._model import TreeStructure


def leaf_boxes(tree: TreeStructure, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)``, each leaves x features: the leaf's region is
    ``lower < float32(x) <= upper`` for every feature."""
    lower = np.full((tree.n_leaves, n_features), -np.inf)
    upper = np.full((tree.n_leaves, n_features), np.inf)
    leaf_index = {int(node): index for index, node in enumerate(tree.leaf_nodes)}
    stack: list[tuple[int, np.ndarray, np.ndarray]] = [
        (0, np.full(n_features, -np.inf), np.full(n_features, np.inf))
    ]
    while stack:
        node, low, high = stack.pop()
        left = int(tree.children_left[node])
        if left == -1:
            lower[leaf_index[node]], upper[leaf_index[node]] = low, high
            continue
        feature, threshold = int(tree.feature[node]), float(tree.threshold[node])
        left_high, right_low = high.copy(), low.copy()
        left_high[feature] = min(high[feature], threshold)
        right_low[feature] = max(low[feature], threshold)
        stack.append((left, low, left_high))
        stack.append((int(tree.children_right[node]), right_low, high))
    return lower, upper


def largest_at_most(threshold: float) -> float:
    """The largest double whose float32 rounding is ``<= threshold``."""
    if not math.isfinite(threshold):
        return threshold
    below = np.float32(threshold)
    if float(below) > threshold:
        below = np.nextafter(below, np.float32(-np.inf))
    above = np.nextafter(below, np.float32(np.inf))
    if not np.isfinite(above):
        return math.inf
    middle = float(below) / 2 + float(above) / 2  # exact: float32 values have 24-bit mantissas
    return (
        middle if float(np.float32(middle)) <= threshold else float(np.nextafter(middle, -np.inf))
    )


def _spread(parameter: Parameter, low: float, high: float, count: int) -> list[float]:
    if count <= 0 or high <= low:
        return []
    if parameter.log and low > 0:
        return list(np.geomspace(low, high, count + 2)[1:-1])
    return list(np.linspace(low, high, count + 2)[1:-1])


def probe_values(
    parameter: Parameter, lower: float, upper: float, *, interior: int
) -> list[Any] | None:
    """Values of one input inside ``lower < float32(x) <= upper`` and its domain: both extremes
    and ``interior`` values between them (every value where there are few). None: empty."""
    if parameter.kind in ("categorical", "bool") or parameter.values is not None:
        domain = parameter.domain_values()
        features = parameter.numeric(domain).astype(np.float32).astype(np.float64)
        inside = domain[(features > lower) & (features <= upper)].tolist()
        if len(inside) > interior + 2:
            keep = np.unique(np.round(np.linspace(0, len(inside) - 1, interior + 2)).astype(int))
            inside = [inside[i] for i in keep]
        return inside or None
    assert parameter.low is not None and parameter.high is not None
    # float32(x) > lower  <=>  x > largest_at_most(lower); float32(x) <= upper likewise
    below, last = largest_at_most(lower), largest_at_most(upper)
    if parameter.kind == "int":
        low, high = int(parameter.low), int(parameter.high)
        if math.isfinite(below):
            low = max(low, math.floor(below) + 1)
        if math.isfinite(last):
            high = min(high, math.floor(last))
        if low > high:
            return None
        if high - low + 1 <= interior + 2:
            return list(range(low, high + 1))
        middle = {round(v) for v in _spread(parameter, low, high, interior)}
        return sorted({low, high} | middle)
    first = float(np.nextafter(below, np.inf))
    low_f, high_f = max(float(parameter.low), first), min(float(parameter.high), last)
    if low_f > high_f:
        return None
    return sorted({low_f, high_f, *_spread(parameter, low_f, high_f, interior)})


def region_probes(
    inputs: Sequence[Parameter],
    lower: np.ndarray,
    upper: np.ndarray,
    positions: Sequence[int],
    *,
    max_probes: int = 256,
) -> dict[str, list[Any]] | None:
    """Probe points of one leaf's region over the inputs at ``positions`` (those constraints
    mention): the product of each input's probe values, about ``max_probes`` points at most
    (always the corners). Columns by input name; None when the region holds no domain point."""
    if not positions:
        return {}
    interior = max(0, int(max_probes ** (1 / len(positions))) - 2)
    axes = []
    for position in positions:
        values = probe_values(inputs[position], lower[position], upper[position], interior=interior)
        if values is None:
            return None
        axes.append(values)
    rows = list(itertools.product(*axes))
    return {
        inputs[position].name: [row[column] for row in rows]
        for column, position in enumerate(positions)
    }
