"""One decision tree whose every leaf holds a complete configuration, valid on its whole region.

:class:`JointSelector` works in two steps:

1. *Partition.* A tree splits the input points, learning either the decisions' codes or, per
   point, the predicted relative regret of each of the ``max_candidates`` most frequent
   optimal configurations (a configuration invalid at the point counts as ``regret_cap``).

   - ``partition="codes"`` (default, decision 0025) fits a multi-output
     ``DecisionTreeClassifier`` to the decided configuration's value codes: the tree learns the
     decisions themselves, and the depth sweep (predicted and measured regret) decides how far
     it follows them.
   - ``partition="regret"`` grows the tree that directly minimises the total regret of one
     configuration per leaf (:mod:`mlkaps_gpu.trees._regret_tree`, greedy, with scikit-learn's
     float32 / midpoint threshold conventions). Measured against the truth of the
     AutoHeuristic tables, it merged points whose predicted regrets differ by less than the
     model's error, and shipped up to 0.004 less than the decisions it was fitted on.
   - ``partition="regressor"`` fits a multi-output scikit-learn ``DecisionTreeRegressor`` to the
     regret vectors (clipped to ``regret_cap``): squared error on the vectors is only a proxy
     of the total regret, and it keeps splitting until the vectors are equal.

   ``experiments/tree_modes.py`` compares them. Whatever the partition, sibling leaves that get
   the same configuration are merged at the end, so the header holds no redundant test.
2. *Leaf choice.* Per leaf, the candidates are the distinct optimal configurations of its points;
   the leaf gets the candidate valid on the leaf's whole region (checked at the region's extreme
   and interior probe points and at the leaf's points, see :mod:`mlkaps_gpu.trees._regions`)
   with the lowest total predicted relative regret over the leaf's points. Where none is valid
   on the whole region, the region is split further at the exact boundary where the best
   candidate stops being valid, or the leaf gets the best valid alternative
   (:mod:`mlkaps_gpu.trees._leaf_choice`); ``leaves_`` says which.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Self

import numpy as np
import pandas as pd
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from mlkaps_gpu.space import Space
from mlkaps_gpu.trees._leaf_choice import LeafChoice, Plan, graft, plan_leaves
from mlkaps_gpu.trees._model import DecisionModel, LeafOutput, Ranking, TreeStructure
from mlkaps_gpu.trees._regions import leaf_boxes
from mlkaps_gpu.trees._regret import RegretOracle
from mlkaps_gpu.trees._regret_tree import grow_regret_tree, merge_equal_leaves
from mlkaps_gpu.trees._selector import FitContext, Selector, design_codes
from mlkaps_gpu.trees._validity import Validity

PARTITIONS = ("regret", "regressor", "codes")
#: The partition a joint tree uses unless told.
DEFAULT_PARTITION = "codes"


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
        leaves_: one row per leaf of the partition (several where it was split for validity):
            points, candidates, the configuration's total and mean regret over the partition
            leaf's points, and where it came from (``leaf``, ``split``, ``pool``, ``repair``,
            or ``unchecked`` when no configuration is valid on the whole region).
    """

    def __init__(
        self,
        *,
        max_depth: int | None = 8,
        min_samples_leaf: int = 1,
        random_state: int = 0,
        partition: str = DEFAULT_PARTITION,
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
        if context.space is None or (context.score is None and context.oracle is None):
            raise ValueError(
                "JointSelector.fit needs space= (the search space) and score= (the predicted "
                "objective of rows of inputs + design) or oracle="
            )
        if self.partition not in PARTITIONS:
            raise ValueError(f"unknown partition {self.partition!r} (allowed: {PARTITIONS})")
        if self.max_candidates < 1:
            raise ValueError("max_candidates must be >= 1")
        space = context.space
        oracle = context.oracle
        if oracle is None:
            assert context.score is not None
            oracle = RegretOracle(optima, space, context.score)
        if oracle.n_points != len(optima):
            raise ValueError(f"the oracle has {oracle.n_points} points, the optima {len(optima)}")
        codes = np.column_stack([design_codes(optima, p) for p in self.design_])
        configurations, inverse, counts = np.unique(
            codes, axis=0, return_inverse=True, return_counts=True
        )
        inverse = inverse.reshape(-1)
        by_frequency = np.argsort(-counts, kind="stable")
        self.tree_ = self._partition(features, codes, configurations[by_frequency], oracle)
        structure = self._partition_structure()
        plans, rows = self._plan_leaves(
            structure, features, codes, configurations, inverse, by_frequency, oracle, space
        )
        self.leaves_ = pd.DataFrame(rows)
        self._rank_from: tuple[np.ndarray, RegretOracle] | None = (features, oracle)
        structure, leaves = graft(structure, plans)
        chosen = np.array([leaf.codes for leaf in leaves], dtype=np.int64)
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

    def rank_configurations(self) -> Self:
        """Add the per-leaf ranking (:meth:`_ranking`) to the model fitted last, once; a
        selector read back from data keeps the ranking it was written with."""
        model = self._check_fitted()
        source = getattr(self, "_rank_from", None)
        if model.ranking is None and source is not None:
            chosen = np.column_stack([output.codes for output in model.outputs])
            ranking = self._ranking(model.trees[0], chosen, *source)
            self.model_ = dataclasses.replace(model, ranking=ranking)
        self._rank_from = None  # the oracle's cache is not held past the ranking
        return self

    def _ranking(
        self,
        structure: TreeStructure,
        chosen: np.ndarray,
        features: np.ndarray,
        oracle: RegretOracle,
    ) -> Ranking:
        """The tree's distinct configurations ranked per leaf: its own first, then the others
        by their mean predicted regret over the leaf's points where they can run (valid, listed
        there by a table replay, and predicted), those that can run at none of them last; a
        leaf without points ranks them over all points.

        The mean is taken where a configuration can run because a library walks the ranking
        past the configurations it cannot run at its inputs: where one is unlisted, the next
        is taken, so its cost there is not its own."""
        portfolio = np.unique(chosen, axis=0)
        n_points, n_ranked = oracle.n_points, len(portfolio)
        owner = np.repeat(np.arange(n_points), n_ranked)
        candidates = np.tile(portfolio, (n_points, 1))
        regret = oracle.regret(owner, candidates).reshape(n_points, n_ranked)
        table = oracle.space.assemble(oracle.inputs.iloc[owner], candidates)
        usable = oracle.space.is_valid(table).reshape(n_points, n_ranked)
        usable &= np.isfinite(regret)
        regret = np.where(usable, regret, 0.0)
        leaf_of = structure.apply(features)
        order = np.empty((structure.n_leaves, n_ranked), dtype=np.int64)
        for leaf in range(structure.n_leaves):
            points = np.flatnonzero(leaf_of == leaf)
            if len(points) == 0:
                points = np.arange(n_points)
            runs = usable[points].sum(axis=0)
            mean = regret[points].sum(axis=0) / np.maximum(runs, 1)
            ranks = np.lexsort((np.arange(n_ranked), mean, runs == 0))
            own = int(np.flatnonzero((portfolio == chosen[leaf]).all(axis=1))[0])
            order[leaf] = [own, *(int(r) for r in ranks if r != own)]
        return Ranking(portfolio, order)

    def grown_depth(self) -> int:
        """Depth of the partition as grown, before validity splits and before sibling leaves
        with the same configuration were merged (a merged tree can be shallow while a deeper
        limit still changes the partition)."""
        self._check_fitted()
        return self._partition_structure().depth

    def _partition_structure(self) -> TreeStructure:
        """The partition ``tree_`` as node arrays (read from scikit-learn's where it is one)."""
        if isinstance(self.tree_, TreeStructure):
            return self.tree_
        return TreeStructure.from_sklearn(self.tree_)

    def _plan_leaves(
        self,
        structure: TreeStructure,
        features: np.ndarray,
        codes: np.ndarray,
        configurations: np.ndarray,
        inverse: np.ndarray,
        by_frequency: np.ndarray,
        oracle: RegretOracle,
        space: Space,
    ) -> tuple[list[Plan], list[dict[str, Any]]]:
        """Per leaf of the partition, the plan of its configuration (:class:`LeafChoice`) and
        the rows of ``leaves_``."""
        leaf_of = structure.apply(features)
        validity = Validity.build(
            self.inputs_, self.design_, [c.source for c in space.constraints], optima_codes=codes
        )
        features32 = features.astype(np.float32).astype(np.float64)
        lower, upper = leaf_boxes(structure, len(self.inputs_))
        leaves = []
        for leaf in range(structure.n_leaves):
            points = np.flatnonzero(leaf_of == leaf)
            local, local_counts = np.unique(inverse[points], return_counts=True)
            local = local[np.argsort(-local_counts, kind="stable")][: self.max_candidates]
            leaves.append((leaf, points, local))
        # every leaf's candidates at its points, scored in one batch (the leaves read the cache)
        oracle.regret(
            np.concatenate([np.repeat(points, len(local)) for _, points, local in leaves]),
            np.concatenate(
                [np.tile(configurations[local], (len(points), 1)) for _, points, local in leaves]
            ),
        )
        plans: list[Plan] = []
        rows: list[dict[str, Any]] = []
        for leaf, points, local in leaves:
            choice = LeafChoice(
                oracle,
                validity,
                self.inputs_,
                features32,
                points,
                max_candidates=self.max_candidates,
                max_probes=self.max_probes,
            )
            plan = choice.plan(
                configurations[local], configurations[by_frequency], lower[leaf], upper[leaf]
            )
            plans.append(plan)
            for part in plan_leaves(plan):
                rows.append(
                    {
                        "leaf": leaf,
                        "points": len(points),
                        "candidates": len(local),
                        "total_regret": part.total,
                        "mean_regret": part.total / max(1, len(points)),
                        "source": part.source,
                    }
                )
        return plans, rows

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
        valid &= np.isfinite(regret)  # a configuration the score cannot predict counts as invalid
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
