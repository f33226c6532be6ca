"""The configuration of one leaf of a joint tree, valid on the leaf's whole region.

A leaf's *region* is a box ``lower < float32(x) <= upper`` (see :mod:`mlkaps_gpu.trees._regions`);
a configuration is *valid on a box* when it satisfies every constraint at the box's probe points
(its extremes and interior points of the constrained inputs) and at the optima points inside it.

:meth:`LeafChoice.plan` returns, in this order of preference:

1. ``leaf``: the leaf's candidate (an optimum of its points) of least total regret over its
   points among those valid on the region;
2. ``split``: the leaf's best candidate valid at its points is kept where it is valid, and the
   region is cut at the exact float32 boundary where it stops being valid (found by bisection on
   float32 values, one constrained input at a time, at most ``max_splits`` cuts on a path; where
   a constraint ties two inputs, ``nb <= min(m, n)``, and no single cut is enough, the region is
   first shrunk to its points' range on one of them, decision 0033). The
   part without points gets the configuration of least total regret over the leaf's points
   among those valid on that part (the leaf's candidates, the most frequent optima and the best
   candidate with its constrained parameters changed). Such validity splits may add levels
   below the tree's ``max_depth``;
3. ``pool`` / ``repair``: the whole region gets the best of those alternatives;
4. ``unchecked``: nothing is valid everywhere: the best candidate, which the header's run-time
   check replaces where it is invalid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlkaps_gpu.space import Parameter
from mlkaps_gpu.trees._model import TreeStructure
from mlkaps_gpu.trees._regions import region_probes
from mlkaps_gpu.trees._regret import RegretOracle
from mlkaps_gpu.trees._validity import Validity


@dataclass(frozen=True)
class LeafPlan:
    """One leaf: its configuration (design codes), total regret over its points, origin."""

    codes: np.ndarray
    total: float
    source: str


@dataclass(frozen=True)
class SplitPlan:
    """A validity split: ``float32(x[feature]) <= threshold`` goes to ``left``."""

    feature: int
    threshold: float
    nan_goes_left: bool
    left: Plan
    right: Plan


Plan = LeafPlan | SplitPlan


def plan_leaves(plan: Plan) -> list[LeafPlan]:
    """The leaves of a plan, left to right."""
    if isinstance(plan, LeafPlan):
        return [plan]
    return plan_leaves(plan.left) + plan_leaves(plan.right)


def _feature_range(parameter: Parameter) -> tuple[float, float]:
    """``(below, top)``: the box ``below < float32(x) <= top`` is the whole domain."""
    values = parameter.numeric(parameter.domain_values()).astype(np.float32)
    if parameter.values is None and parameter.kind in ("int", "float"):
        assert parameter.low is not None and parameter.high is not None
        low, high = np.float32(parameter.low), np.float32(parameter.high)
    else:
        low, high = values.min(), values.max()
    return float(np.nextafter(low, np.float32(-np.inf))), float(high)


def _next32(value: float, direction: float) -> float:
    return float(np.nextafter(np.float32(value), np.float32(direction)))


class LeafChoice:
    """Chooses the plan of one leaf (see the module docstring).

    Args:
        oracle: regrets of configurations at the optima points.
        validity: the constraints.
        inputs: input parameters (feature order).
        features32: float32-rounded features of every optima point.
        points: the leaf's points (indices into the optima).
        max_candidates: most configurations scored per choice.
        max_probes: about how many probe points check a box.
        max_splits: most validity splits on one path.
    """

    def __init__(
        self,
        oracle: RegretOracle,
        validity: Validity,
        inputs: Sequence[Parameter],
        features32: np.ndarray,
        points: np.ndarray,
        *,
        max_candidates: int,
        max_probes: int,
        max_splits: int = 3,
    ) -> None:
        self.oracle = oracle
        self.validity = validity
        self.inputs = tuple(inputs)
        self.features32 = features32
        self.points = points
        self.max_candidates = max_candidates
        self.max_probes = max_probes
        self.max_splits = max_splits
        self.checks = bool(validity.constraints) and bool(validity.constrained_design)

    # -------------------------------------------------------------------------- validity
    def _probe_columns(self, lower: np.ndarray, upper: np.ndarray) -> dict[str, np.ndarray]:
        positions = self.validity.constrained_inputs
        region = region_probes(self.inputs, lower, upper, positions, max_probes=self.max_probes)
        features = self.features32[self.points]
        inside = np.all((features > lower) & (features <= upper), axis=1)
        table = self.oracle.inputs.iloc[self.points[inside]]
        columns: dict[str, np.ndarray] = {}
        for position in positions:
            parameter = self.inputs[position]
            values = list(table[parameter.name]) + list((region or {}).get(parameter.name, []))
            if parameter.kind == "categorical":
                columns[parameter.name] = np.asarray(values, dtype=object)
            else:
                columns[parameter.name] = parameter.numeric(np.asarray(values))
        return columns

    def valid_on(self, candidates: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Which candidates (full codes) are valid on the box."""
        if not self.checks or len(candidates) == 0:
            return np.ones(len(candidates), dtype=bool)
        probes = self._probe_columns(lower, upper)
        n_probes = len(next(iter(probes.values()))) if probes else 1
        if n_probes == 0:
            return np.ones(len(candidates), dtype=bool)
        owner = np.repeat(np.arange(len(candidates)), n_probes)
        columns = {name: np.tile(values, len(candidates)) for name, values in probes.items()}
        satisfied = self.validity.satisfied(columns, candidates[owner])
        return np.asarray(satisfied.reshape(len(candidates), n_probes).all(axis=1))

    def valid_at_points(self, candidates: np.ndarray) -> np.ndarray:
        if not self.checks:
            return np.ones(len(candidates), dtype=bool)
        owner = np.repeat(self.points, len(candidates))
        tiled = np.tile(candidates, (len(self.points), 1))
        ok = self.oracle.valid(owner, tiled).reshape(len(self.points), len(candidates))
        return np.asarray(ok.all(axis=0))

    # ---------------------------------------------------------------------------- choice
    def totals(self, candidates: np.ndarray) -> np.ndarray:
        """Total predicted relative regret of each candidate over the leaf's points."""
        totals = self.oracle.matrix(self.points, candidates).sum(axis=0)
        return np.where(np.isfinite(totals), totals, np.inf)

    def plan(
        self, local: np.ndarray, frequent: np.ndarray, lower: np.ndarray, upper: np.ndarray
    ) -> Plan:
        """The plan of the leaf whose candidates are ``local`` (most frequent first)."""
        totals = self.totals(local)
        valid = self.valid_on(local, lower, upper)
        if valid.any():
            index = int(np.argmin(np.where(valid, totals, np.inf)))
            return LeafPlan(local[index], float(totals[index]), "leaf")
        at_points = self.valid_at_points(local)
        best = local[int(np.argmin(np.where(at_points, totals, np.inf)))]
        if at_points.any():
            split = self._split(best, local, frequent, lower, upper, self.max_splits)
            if split is not None:
                return split
        alternative = self._alternative(best, local, frequent, lower, upper)
        if alternative is not None:
            return alternative
        return LeafPlan(best, float(np.min(totals)), "unchecked")

    def _alternative(
        self,
        best: np.ndarray,
        local: np.ndarray,
        frequent: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
    ) -> LeafPlan | None:
        """The least-regret configuration valid on the box among the leaf's candidates, the
        most frequent optima and ``best`` repaired (None: none is valid)."""
        limit = self.max_candidates
        pool = np.concatenate([local, frequent])
        pool = pool[self.valid_on(pool, lower, upper)][:limit]
        repaired = self._repairs(best, lower, upper)[:limit]
        options = np.concatenate([pool, repaired])
        if len(options) == 0:
            return None
        totals = self.totals(options)
        index = int(np.argmin(totals))
        source = "pool" if index < len(pool) else "repair"
        return LeafPlan(options[index], float(totals[index]), source)

    def _repairs(self, codes: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """``codes`` with its constrained parameters changed, valid on the box, nearest first."""
        positions = list(self.validity.constrained_design)
        alternatives = self.validity.candidate_codes()
        trials = np.repeat(codes[None, :], len(alternatives), axis=0)
        trials[:, positions] = alternatives
        trials = trials[self.valid_on(trials, lower, upper)]
        distance = np.abs(trials[:, positions] - codes[positions]).sum(axis=1)
        return trials[np.argsort(distance, kind="stable")]

    # ------------------------------------------------------------------- validity splits
    def _split(
        self,
        best: np.ndarray,
        local: np.ndarray,
        frequent: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        budget: int,
    ) -> Plan | None:
        """Keep ``best`` where it is valid by cutting the box (None: no cut within budget)."""
        if self.valid_on(best[None, :], lower, upper)[0]:
            return LeafPlan(best, float(self.totals(best[None, :])[0]), "split")
        if budget == 0:
            return None
        cut = self._best_cut(best, lower, upper)
        if cut is None:
            return None
        feature, threshold, points_left = cut
        kept_lower, kept_upper = lower.copy(), upper.copy()
        other_lower, other_upper = lower.copy(), upper.copy()
        if points_left:
            kept_upper[feature] = other_lower[feature] = threshold
        else:
            kept_lower[feature] = other_upper[feature] = threshold
        kept = self._split(best, local, frequent, kept_lower, kept_upper, budget - 1)
        if kept is None:
            return None
        other = self._alternative(best, local, frequent, other_lower, other_upper)
        if other is None:
            other = LeafPlan(best, float(self.totals(best[None, :])[0]), "unchecked")
        left, right = (kept, other) if points_left else (other, kept)
        return SplitPlan(feature, threshold, points_left, left, right)

    def _best_cut(
        self, best: np.ndarray, lower: np.ndarray, upper: np.ndarray
    ) -> tuple[int, float, bool] | None:
        """``(feature, threshold, points go left)`` of the cut that keeps the largest share of
        the feature's range valid for ``best`` while keeping every point on the valid side
        (where no single cut makes ``best`` valid: :meth:`_shrink_cut`)."""
        options = self._single_cuts(best, lower, upper)
        if not options:
            return self._shrink_cut(best, lower, upper)
        _, feature, threshold, points_left = min(options, key=lambda o: (o[0], o[1], o[3]))
        return feature, threshold, points_left

    def _single_cuts(
        self, best: np.ndarray, lower: np.ndarray, upper: np.ndarray
    ) -> list[tuple[float, int, float, bool]]:
        """Every cut on one constrained input after which ``best`` is valid on the box, every
        point kept on the valid side: ``(share of the range cut off, feature, threshold,
        points go left)``."""
        options = []
        for feature, low, high, first, last in self._constrained_ranges(lower, upper):
            span = high - low
            # points above the invalid part: the smallest valid lower bound
            cut = self._bisect(best, lower, upper, feature, low, first, True)
            if cut is not None:
                options.append(((cut - low) / span, feature, cut, False))
            cut = self._bisect(best, lower, upper, feature, last, high, False)
            if cut is not None:
                options.append(((high - cut) / span, feature, cut, True))
        return options

    def _constrained_ranges(
        self, lower: np.ndarray, upper: np.ndarray
    ) -> list[tuple[int, float, float, float, float]]:
        """Per constrained input whose range in the box is not empty: ``(feature, low, high,
        first, last)``, the box's range ``low < x <= high`` and the largest lower bound and
        smallest upper bound that keep every point of the leaf inside."""
        features = self.features32[self.points]
        ranges = []
        for feature in self.validity.constrained_inputs:
            below, top = _feature_range(self.inputs[feature])
            low, high = max(lower[feature], below), min(upper[feature], top)
            if high > low:
                first = _next32(float(features[:, feature].min()), -np.inf)
                ranges.append((feature, low, high, first, float(features[:, feature].max())))
        return ranges

    def _shrink_cut(
        self, best: np.ndarray, lower: np.ndarray, upper: np.ndarray
    ) -> tuple[int, float, bool] | None:
        """Where no single cut makes ``best`` valid (a constraint over several inputs, as
        ``nb <= min(m, n)``: the box must lose its small m *and* its small n), the cut that
        shrinks the box to its points' range on one constrained input after which one cut
        (or none) makes ``best`` valid, the largest such shrink first; None where none does."""
        options = []
        for feature, low, high, first, last in self._constrained_ranges(lower, upper):
            if first > low:
                options.append(((first - low) / (high - low), feature, first, False))
            if last < high:
                options.append(((high - last) / (high - low), feature, last, True))
        for _, feature, threshold, points_left in sorted(options, key=lambda o: (-o[0], o[1])):
            shrunk_lower, shrunk_upper = lower.copy(), upper.copy()
            if points_left:
                shrunk_upper[feature] = threshold
            else:
                shrunk_lower[feature] = threshold
            if self.valid_on(best[None, :], shrunk_lower, shrunk_upper)[0] or (
                self._single_cuts(best, shrunk_lower, shrunk_upper)
            ):
                return feature, threshold, points_left
        return None

    def _bisect(
        self,
        best: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
        feature: int,
        start: float,
        stop: float,
        raise_lower: bool,
    ) -> float | None:
        """The float32 bound in ``[start, stop]`` giving ``best`` the largest valid box: the
        smallest valid lower bound (``raise_lower``) or the largest valid upper bound."""
        if not stop >= start:
            return None

        def valid(bound: float) -> bool:
            box_lower, box_upper = lower.copy(), upper.copy()
            if raise_lower:
                box_lower[feature] = bound
            else:
                box_upper[feature] = bound
            return bool(self.valid_on(best[None, :], box_lower, box_upper)[0])

        bad, good = (start, stop) if raise_lower else (stop, start)
        if not valid(good):
            return None
        if valid(bad):
            return bad
        while _next32(bad, good) != good:  # bisection over float32 values
            middle = float(np.float32(bad / 2 + good / 2))
            if middle in (bad, good):
                middle = _next32(bad, good)
            if valid(middle):
                good = middle
            else:
                bad = middle
        return good


def graft(tree: TreeStructure, plans: Sequence[Plan]) -> tuple[TreeStructure, list[LeafPlan]]:
    """Replace leaf ``i`` of ``tree`` by ``plans[i]`` (a leaf or a subtree of validity splits).

    Returns the new tree (depth-first node order, as scikit-learn's) and its leaves' plans in
    leaf-index order."""
    lefts: list[int] = []
    rights: list[int] = []
    features: list[int] = []
    thresholds: list[float] = []
    nan_left: list[bool] = []
    leaves: list[LeafPlan] = []
    leaf_index = {int(node): index for index, node in enumerate(tree.leaf_nodes)}

    def add(feature: int, threshold: float, goes_left: bool) -> int:
        lefts.append(-1)
        rights.append(-1)
        features.append(feature)
        thresholds.append(threshold)
        nan_left.append(goes_left)
        return len(lefts) - 1

    def copy_plan(plan: Plan) -> int:
        if isinstance(plan, LeafPlan):
            leaves.append(plan)
            return add(-2, -2.0, False)
        node = add(plan.feature, plan.threshold, plan.nan_goes_left)
        lefts[node] = copy_plan(plan.left)
        rights[node] = copy_plan(plan.right)
        return node

    def copy_node(node: int) -> int:
        left = int(tree.children_left[node])
        if left == -1:
            return copy_plan(plans[leaf_index[node]])
        new = add(
            int(tree.feature[node]), float(tree.threshold[node]), bool(tree.nan_goes_left[node])
        )
        lefts[new] = copy_node(left)
        rights[new] = copy_node(int(tree.children_right[node]))
        return new

    copy_node(0)
    grafted = TreeStructure(
        children_left=np.array(lefts),
        children_right=np.array(rights),
        feature=np.array(features),
        threshold=np.array(thresholds),
        nan_goes_left=np.array(nan_left),
    )
    return grafted, leaves
