"""One decision tree whose every leaf holds a complete configuration, valid on its whole region.

:class:`JointSelector` works in two steps:

1. *Partition.* A tree splits the input points. Its training target, per point, is the
   predicted relative regret of each of the ``max_candidates`` most frequent optimal
   configurations (a configuration invalid at the point counts as ``regret_cap``).

   - ``partition="regret"`` (default) grows the tree that directly minimises the total regret
     of one configuration per leaf (:mod:`mlkaps_gpu.trees._regret_tree`, greedy, with
     scikit-learn's float32 / midpoint threshold conventions).
   - ``partition="regressor"`` fits a multi-output scikit-learn ``DecisionTreeRegressor`` to the
     regret vectors (clipped to ``regret_cap``): squared error on the vectors is only a proxy
     of the total regret, and it keeps splitting until the vectors are equal.
   - ``partition="codes"`` fits a multi-output ``DecisionTreeClassifier`` to the optimum's
     value codes (no objective needed for the split, but points whose optima differ only in a
     parameter that barely matters get split apart).

   ``experiments/tree_modes.py`` compares them. Whatever the partition, sibling leaves that get
   the same configuration are merged at the end, so the header holds no redundant test.
2. *Leaf choice.* Per leaf, the candidates are the distinct optimal configurations of its points;
   the leaf gets the candidate valid on the leaf's whole region (checked at the region's extreme
   and interior probe points and at the leaf's points, see :mod:`mlkaps_gpu.trees._regions`)
   with the lowest total predicted relative regret over the leaf's points. If none is valid
   there, the most frequent optima of all points are tried, then the combinations of the
   constrained parameters nearest to the leaf's best candidate (``repair``); if still none is
   valid the best candidate is kept and the run-time check of the header falls back (reported
   in ``leaves_``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from mlkaps_gpu.trees._model import DecisionModel, LeafOutput, TreeStructure
from mlkaps_gpu.trees._regions import leaf_boxes, region_probes
from mlkaps_gpu.trees._regret import RegretOracle
from mlkaps_gpu.trees._regret_tree import grow_regret_tree, merge_equal_leaves
from mlkaps_gpu.trees._selector import FitContext, Selector, design_codes
from mlkaps_gpu.trees._validity import Validity

PARTITIONS = ("regret", "regressor", "codes")


class JointSelector(Selector):
    """One tree over the inputs; each leaf holds one complete, valid configuration.

    Args:
        max_depth: depth limit of the tree.
        min_samples_leaf: fewest optima points per leaf.
        random_state: seed of scikit-learn's tie-breaking between equally good splits.
        partition: ``"regret"``, ``"regressor"`` or ``"codes"`` (see the module docstring).
        max_candidates: most configurations scored per leaf (the most frequent ones) and
            regret columns of the partition target.
        regret_cap: relative regret the partition target is clipped to.
        max_probes: about how many probe points check a candidate on a leaf's region.

    Attributes (after ``fit``):
        tree_: the partition: a :class:`TreeStructure` (``regret``) or the fitted
            scikit-learn estimator.
        leaves_: one row per leaf: points, candidates, chosen configuration's total and mean
            regret over the leaf's points, and where it came from (``leaf``, ``pool``,
            ``repair``, or ``unchecked`` when no candidate was valid on the whole region).
    """

    def __init__(
        self,
        *,
        max_depth: int | None = 8,
        min_samples_leaf: int = 1,
        random_state: int = 0,
        partition: str = "regret",
        max_candidates: int = 64,
        regret_cap: float = 1.0,
        max_probes: int = 256,
    ) -> None:
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.random_state = random_state
        self.partition = partition
        self.max_candidates = max_candidates
        self.regret_cap = regret_cap
        self.max_probes = max_probes

    # -------------------------------------------------------------------------------- fit
    def _fit_model(
        self, features: np.ndarray, optima: pd.DataFrame, context: FitContext
    ) -> DecisionModel:
        if context.space is None or context.score is None:
            raise ValueError(
                "JointSelector.fit needs space= (the search space) and score= (the predicted "
                "objective of rows of inputs + design)"
            )
        if self.partition not in PARTITIONS:
            raise ValueError(f"unknown partition {self.partition!r} (allowed: {PARTITIONS})")
        if self.max_candidates < 1:
            raise ValueError("max_candidates must be >= 1")
        space = context.space
        oracle = context.oracle or RegretOracle(optima, space, context.score)
        codes = np.column_stack([design_codes(optima, p) for p in self.design_])
        configurations, inverse, counts = np.unique(
            codes, axis=0, return_inverse=True, return_counts=True
        )
        inverse = inverse.reshape(-1)
        by_frequency = np.argsort(-counts, kind="stable")
        self.tree_ = self._partition(features, codes, configurations[by_frequency], oracle)
        structure = (
            self.tree_
            if isinstance(self.tree_, TreeStructure)
            else TreeStructure.from_sklearn(self.tree_)
        )
        leaf_of = structure.apply(features)
        validity = Validity.build(
            self.inputs_, self.design_, [c.source for c in space.constraints], optima_codes=codes
        )
        lower, upper = leaf_boxes(structure, len(self.inputs_))
        chosen = np.zeros((structure.n_leaves, len(self.design_)), dtype=np.int64)
        rows = []
        for leaf in range(structure.n_leaves):
            points = np.flatnonzero(leaf_of == leaf)
            local, local_counts = np.unique(inverse[points], return_counts=True)
            local = local[np.argsort(-local_counts, kind="stable")][: self.max_candidates]
            probes = self._probes(validity, lower[leaf], upper[leaf], points, oracle)
            choice = _LeafChoice(self, oracle, validity, points, probes)
            chosen[leaf], total, source = choice.best(
                configurations[local], configurations[by_frequency]
            )
            rows.append(
                {
                    "leaf": leaf,
                    "points": len(points),
                    "candidates": len(local),
                    "total_regret": total,
                    "mean_regret": total / max(1, len(points)),
                    "source": source,
                }
            )
        self.leaves_ = pd.DataFrame(rows)
        structure, chosen = merge_equal_leaves(structure, chosen)
        outputs = tuple(
            LeafOutput(parameter, 0, chosen[:, index])
            for index, parameter in enumerate(self.design_)
        )
        return DecisionModel(
            inputs=self.inputs_,
            trees=(structure,),
            tree_names=("joint",),
            outputs=outputs,
            description=(
                f"JointSelector(max_depth={self.max_depth}, min_samples_leaf="
                f"{self.min_samples_leaf}, partition={self.partition!r}, random_state="
                f"{self.random_state}), one tree whose leaves hold complete configurations"
            ),
        )

    def _partition(
        self,
        features: np.ndarray,
        codes: np.ndarray,
        frequent: np.ndarray,
        oracle: RegretOracle,
    ) -> Any:
        options = {
            "max_depth": self.max_depth,
            "min_samples_leaf": self.min_samples_leaf,
            "random_state": self.random_state,
        }
        if self.partition == "codes":
            return DecisionTreeClassifier(**options).fit(features, codes)
        columns = frequent[: self.max_candidates]
        points = np.arange(oracle.n_points)
        regret = oracle.columns(columns)
        owner = np.repeat(points, len(columns))
        valid = oracle.valid(owner, np.tile(columns, (len(points), 1))).reshape(regret.shape)
        if self.partition == "regret":
            target = np.where(valid, regret, self.regret_cap)
            return grow_regret_tree(
                features,
                target,
                max_depth=self.max_depth,
                min_samples_leaf=self.min_samples_leaf,
            )
        target = np.where(
            valid, np.clip(regret, -self.regret_cap, self.regret_cap), self.regret_cap
        )
        return DecisionTreeRegressor(**options).fit(features, target)

    def _probes(
        self,
        validity: Validity,
        lower: np.ndarray,
        upper: np.ndarray,
        points: np.ndarray,
        oracle: RegretOracle,
    ) -> dict[str, np.ndarray] | None:
        """Constrained-input columns where a leaf's configuration must be valid: the region's
        probe points and the leaf's own points (None: no check needed)."""
        if not validity.constraints or not validity.constrained_design:
            return None
        positions = validity.constrained_inputs
        region = region_probes(self.inputs_, lower, upper, positions, max_probes=self.max_probes)
        table = oracle.inputs.iloc[points]
        columns: dict[str, np.ndarray] = {}
        for position in positions:
            parameter = self.inputs_[position]
            values = list(table[parameter.name]) + list((region or {}).get(parameter.name, []))
            kind = object if parameter.kind == "categorical" else np.float64
            columns[parameter.name] = np.asarray(
                parameter.numeric(values) if kind is np.float64 else values, dtype=kind
            )
        if positions and len(columns[self.inputs_[positions[0]].name]) == 0:
            return None
        return columns


class _LeafChoice:
    """The configuration of one leaf (see the module docstring)."""

    def __init__(
        self,
        selector: JointSelector,
        oracle: RegretOracle,
        validity: Validity,
        points: np.ndarray,
        probes: dict[str, np.ndarray] | None,
    ) -> None:
        self.selector = selector
        self.oracle = oracle
        self.validity = validity
        self.points = points
        self.probes = probes

    def valid_everywhere(self, candidates: np.ndarray) -> np.ndarray:
        """Which candidates (full codes) satisfy every constraint at every probe point."""
        if self.probes is None:
            return np.ones(len(candidates), dtype=bool)
        n_probes = len(next(iter(self.probes.values()))) if self.probes else 1
        owner = np.repeat(np.arange(len(candidates)), n_probes)
        columns = {name: np.tile(values, len(candidates)) for name, values in self.probes.items()}
        satisfied = self.validity.satisfied(columns, candidates[owner])
        return satisfied.reshape(len(candidates), n_probes).all(axis=1)

    def totals(self, candidates: np.ndarray) -> np.ndarray:
        """Total predicted relative regret of each candidate over the leaf's points."""
        return self.oracle.matrix(self.points, candidates).sum(axis=0)

    def best(self, local: np.ndarray, frequent: np.ndarray) -> tuple[np.ndarray, float, str]:
        """``(codes, total regret, source)`` of the leaf's configuration."""
        totals = self.totals(local)
        valid = self.valid_everywhere(local)
        if valid.any():
            index = int(np.argmin(np.where(valid, totals, np.inf)))
            return local[index], float(totals[index]), "leaf"
        fallback = local[int(np.argmin(totals))]
        limit = self.selector.max_candidates
        pool = frequent[self.valid_everywhere(frequent)][:limit]
        if len(pool):
            pool_totals = self.totals(pool)
            index = int(np.argmin(pool_totals))
            return pool[index], float(pool_totals[index]), "pool"
        repaired = self._repairs(fallback)[:limit]
        if len(repaired):
            repair_totals = self.totals(repaired)
            index = int(np.argmin(repair_totals))
            return repaired[index], float(repair_totals[index]), "repair"
        return fallback, float(np.min(totals)), "unchecked"

    def _repairs(self, codes: np.ndarray) -> np.ndarray:
        """Configurations equal to ``codes`` except for the constrained parameters, valid on
        the region, nearest first (sum of code distances)."""
        positions = list(self.validity.constrained_design)
        alternatives = self.validity.candidate_codes()
        trials = np.repeat(codes[None, :], len(alternatives), axis=0)
        trials[:, positions] = alternatives
        trials = trials[self.valid_everywhere(trials)]
        distance = np.abs(trials[:, positions] - codes[positions]).sum(axis=1)
        return trials[np.argsort(distance, kind="stable")]
