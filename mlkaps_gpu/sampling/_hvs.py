"""Hierarchical variance sampling: HVS and HVSr (Gazzola et al.; as used by MLKAPS).

Each batch, a decision tree fitted on the measurements so far partitions the joint input x design
space into boxes (its leaves). A box gets new rows in proportion to ``volume x error``:

- *volume*: the box's share of the unit cube the space is sampled in (inputs mapped as the
  samplers draw them, log-scaled where ``log``; discrete values as equal cells of their codes);
- *error*: the upper end of the chi-squared 95% confidence interval of the objective's variance
  in the box (HVS), or of its relative variance, the squared coefficient of variation (HVSr,
  which does not chase the large absolute variance of slow, large problems).

An optional ``objective_bound`` clips the objective before the tree and the errors see it, so a
few pathological configurations (timeouts, 1e20 failures) cannot attract the whole budget.

New rows are a Latin hypercube inside each box. A row that violates the constraints keeps its
inputs and gets a random valid design inside the box; if its inputs admit none there, new inputs
are drawn inside the box. Until ``2 * min_samples_leaf`` successful measurements exist the
whole space is one box (plain constraint-aware LHS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd
from scipy.stats import chi2, qmc
from sklearn.tree import DecisionTreeRegressor

from mlkaps_gpu.sampling._base import Sampler, SamplerParts
from mlkaps_gpu.space import Parameter, Space

if TYPE_CHECKING:
    from mlkaps_gpu.sampling._settings import SamplingSettings

ErrorKind = Literal["variance", "relative"]
#: Random designs tried per row inside a box when the valid set is not enumerated.
_BOX_TRIALS = 256
#: New input points tried inside a box for a row whose inputs admit no valid design there.
_INPUT_REDRAWS = 10
#: Rounds of in-box top-up when a box's rows collide with rows already seen.
_TOP_UP_ROUNDS = 3


# ---------------------------------------------------------------------------- unit cube
def _is_discrete(space: Space, parameter: Parameter) -> bool:
    return parameter.name in space.design_names or parameter.values is not None


def _continuous_span(parameter: Parameter) -> tuple[float, float]:
    """The interval ``Parameter.from_unit`` maps [0, 1) onto (before rounding ints)."""
    assert parameter.low is not None and parameter.high is not None
    low, high = float(parameter.low), float(parameter.high)
    if parameter.kind == "int":
        low, high = low - 0.5, high + 0.5
        if parameter.log:
            low = max(low, float(parameter.low) * 0.5 + 0.25)
    if parameter.log:
        return float(np.log(low)), float(np.log(high))
    return low, high


def unit_coordinates(space: Space, table: pd.DataFrame) -> np.ndarray:
    """Position of each row in the unit cube the samplers draw from (rows x parameters).

    A discrete value (a design value, an input given as a value list) is the centre of its
    code's cell ``[code / n, (code + 1) / n)``; a range input is inverted through the map
    ``Parameter.from_unit`` samples with (log-scaled where ``log``).
    """
    out = np.empty((len(table), len(space.names)), dtype=np.float64)
    for index, name in enumerate(space.names):
        parameter = space.parameters[name]
        column = table[name].to_numpy()
        if _is_discrete(space, parameter):
            out[:, index] = (parameter.codes(column) + 0.5) / parameter.n_values
            continue
        low, high = _continuous_span(parameter)
        values = column.astype(np.float64)
        values = np.log(values) if parameter.log else values
        out[:, index] = 0.5 if high == low else (values - low) / (high - low)
    return np.clip(out, 0.0, 1.0)


def _cells(space: Space) -> np.ndarray:
    """Number of cells per dimension (0 for continuous inputs)."""
    return np.array(
        [
            p.n_values if _is_discrete(space, p) else 0
            for p in (space.parameters[n] for n in space.names)
        ],
        dtype=np.int64,
    )


@dataclass
class Partition:
    """One leaf box of the HVS tree.

    Attributes:
        lower, upper: corners of the box in the unit cube (discrete sides on cell borders).
        volume: share of the unit cube.
        error: upper confidence bound of the (relative) variance of the objective in the box.
        samples: measurements in the box.
        allocated: rows the current batch draws in the box.
    """

    lower: np.ndarray
    upper: np.ndarray
    volume: float
    error: float
    samples: int
    allocated: int = 0

    @property
    def score(self) -> float:
        return self.volume * self.error


def variance_upper_bound(values: np.ndarray, confidence: float = 0.95) -> float:
    """Upper end of the chi-squared confidence interval of the variance of ``values``."""
    count = len(values)
    if count < 2:
        return 0.0
    alpha = 1.0 - confidence
    return float(np.var(values, ddof=1) * (count - 1) / chi2.ppf(alpha / 2.0, count - 1))


def partition_error(values: np.ndarray, kind: ErrorKind, confidence: float = 0.95) -> float:
    """HVS error of a box: variance bound, or variance bound over the squared mean (HVSr)."""
    upper = variance_upper_bound(values, confidence)
    if kind == "variance":
        return upper
    mean = float(np.mean(values)) if len(values) else 0.0
    return upper / mean**2 if mean != 0.0 else 0.0


def allocate(scores: np.ndarray, volumes: np.ndarray, n: int) -> np.ndarray:
    """``n`` rows shared in proportion to ``scores`` (volumes where every score is 0), by the
    largest remainder, so the counts sum to exactly ``n``."""
    weights = np.where(np.isfinite(scores), np.maximum(scores, 0.0), 0.0)
    if weights.sum() <= 0.0:
        weights = volumes.astype(np.float64)
    raw = weights / weights.sum() * n
    counts = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: n - int(counts.sum())]] += 1
    return counts


class HVSSampler(Sampler):
    """Hierarchical variance sampling (HVS; ``error="relative"`` gives HVSr).

    Args:
        space: the search space.
        seed: random seed.
        objective: the objective column whose variance drives the sampling.
        error: ``"variance"`` (HVS) or ``"relative"`` (HVSr).
        min_samples_leaf: fewest measurements in a leaf of the partitioning tree.
        objective_bound: objective values above it count as the bound (None: no bound).
        confidence: level of the chi-squared interval whose upper end is the error.

    Attributes:
        partitions_: the boxes of the last batch (empty while bootstrapping).
    """

    error_kind: ErrorKind = "variance"

    def __init__(
        self,
        space: Space,
        *,
        seed: int = 0,
        objective: str = "time",
        error: ErrorKind | None = None,
        min_samples_leaf: int = 15,
        objective_bound: float | None = None,
        confidence: float = 0.95,
    ) -> None:
        super().__init__(space, seed=seed)
        error = error or self.error_kind
        if error not in ("variance", "relative"):
            raise ValueError(f"error must be 'variance' or 'relative', got {error!r}")
        if min_samples_leaf < 2:
            raise ValueError(f"min_samples_leaf must be at least 2, got {min_samples_leaf}")
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
        self.objective = objective
        self.error = error
        self.min_samples_leaf = int(min_samples_leaf)
        self.objective_bound = objective_bound
        self.confidence = confidence
        self.partitions_: list[Partition] = []
        self._cell_counts = _cells(space)
        self._design_slice = slice(len(space.inputs), len(space.names))

    @classmethod
    def from_parts(
        cls, space: Space, parts: SamplerParts, settings: SamplingSettings | None = None
    ) -> Sampler:
        """This sampler on the primary objective (:meth:`Sampler.from_parts`)."""
        return cls(space, seed=parts.seed, objective=parts.objective)

    # ----------------------------------------------------------------------- partitions
    def _training(self) -> tuple[np.ndarray, np.ndarray] | None:
        history = self.history_
        if history.empty or self.objective not in history or "status" not in history:
            return None
        values = pd.to_numeric(history[self.objective], errors="coerce").to_numpy(np.float64)
        ok = (history["status"] == "ok").to_numpy() & np.isfinite(values)
        if ok.sum() < 2 * self.min_samples_leaf:
            return None
        target = values[ok]
        if self.objective_bound is not None:
            target = np.minimum(target, self.objective_bound)
        return unit_coordinates(self.space, history.loc[ok, self.space.names]), target

    def partition(self) -> list[Partition]:
        """The leaf boxes of a tree fitted on the successful measurements so far (one box, the
        whole cube, while there are fewer than ``2 * min_samples_leaf``)."""
        dimensions = len(self.space.names)
        whole = Partition(np.zeros(dimensions), np.ones(dimensions), 1.0, 0.0, 0)
        training = self._training()
        if training is None:
            return [whole]
        points, target = training
        tree = DecisionTreeRegressor(min_samples_leaf=self.min_samples_leaf, random_state=0)
        tree.fit(points, target)
        leaves = tree.apply(points)
        structure = tree.tree_
        partitions = []
        stack = [(0, whole.lower, whole.upper)]
        while stack:
            node, lower, upper = stack.pop()
            left, right = structure.children_left[node], structure.children_right[node]
            if left == right:  # a leaf
                values = target[leaves == node]
                volume = float(np.prod(upper - lower))
                error = partition_error(values, self.error, self.confidence)
                partitions.append(Partition(lower, upper, volume, error, len(values)))
                continue
            feature = int(structure.feature[node])
            threshold = float(structure.threshold[node])
            cells = self._cell_counts[feature]
            if cells:  # discrete side: split on the cell border between the two sides' codes
                threshold = float(np.round(threshold * cells)) / cells
            left_upper = upper.copy()
            left_upper[feature] = threshold
            right_lower = lower.copy()
            right_lower[feature] = threshold
            stack.append((int(right), right_lower, upper))
            stack.append((int(left), lower, left_upper))
        return partitions

    # --------------------------------------------------------------------------- asking
    def _ask(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        partitions = self.partition()
        scores = np.array([p.score for p in partitions])
        volumes = np.array([p.volume for p in partitions])
        counts = allocate(scores, volumes, n) if len(partitions) > 1 else np.array([n])
        for partition, count in zip(partitions, counts, strict=True):
            partition.allocated = int(count)
        self.partitions_ = partitions if len(partitions) > 1 else []
        taken = set(self._seen)
        tables = []
        for partition in partitions:
            if partition.allocated == 0:
                continue
            rows = self._box_rows(partition, partition.allocated, rng, latin=True)
            rows = _keep_new(self.space, rows, taken)
            for _ in range(_TOP_UP_ROUNDS):
                missing = partition.allocated - len(rows)
                if missing <= 0:
                    break
                extra = self._box_rows(partition, 2 * missing + 4, rng, latin=False)
                rows = pd.concat([rows, _keep_new(self.space, extra, taken)], ignore_index=True)
            tables.append(rows.iloc[: partition.allocated])
        if not tables:
            return self.space.empty_table()
        return pd.concat(tables, ignore_index=True)

    def _box_rows(
        self, box: Partition, k: int, rng: np.random.Generator, *, latin: bool
    ) -> pd.DataFrame:
        """Up to ``k`` valid rows inside a box: a Latin hypercube (or uniform points) repaired
        inside the box; rows for which the box holds nothing valid are dropped."""
        dimensions = len(self.space.names)
        if latin:
            unit = qmc.LatinHypercube(d=dimensions, rng=rng).random(k)
        else:
            unit = rng.random((k, dimensions))
        unit = box.lower + (box.upper - box.lower) * unit
        inputs = self._inputs_from_unit(unit)
        code_low, code_high = self._code_range(box)
        codes = np.clip(
            np.floor(unit[:, self._design_slice] * self.space.design_sizes).astype(np.int64),
            code_low,
            code_high,
        )
        table = self.space.assemble(inputs, codes)
        invalid = np.flatnonzero(~self.space.is_valid(table))
        if len(invalid) == 0:
            return table
        keep = np.ones(len(table), dtype=bool)
        for row in invalid:
            point = inputs.iloc[[row]].reset_index(drop=True)
            replacement = self._valid_in_box(point, box, code_low, code_high, rng)
            if replacement is None:
                keep[row] = False
                continue
            point, code = replacement
            codes[row] = code
            for name in self.space.input_names:
                inputs.at[row, name] = point[name].iloc[0]
        table = self.space.assemble(inputs, codes)
        return table[keep].reset_index(drop=True)

    def _inputs_from_unit(self, unit: np.ndarray) -> pd.DataFrame:
        # (a table replay's space snaps each point to the nearest recorded input point)
        return self.space.inputs_from_unit(unit[:, : len(self.space.inputs)])

    def _code_range(self, box: Partition) -> tuple[np.ndarray, np.ndarray]:
        """Lowest and highest design code inside the box, per design parameter."""
        sizes = self.space.design_sizes
        low = np.round(box.lower[self._design_slice] * sizes).astype(np.int64)
        high = np.round(box.upper[self._design_slice] * sizes).astype(np.int64) - 1
        return np.clip(low, 0, sizes - 1), np.clip(high, 0, sizes - 1)

    def _valid_in_box(
        self,
        point: pd.DataFrame,
        box: Partition,
        code_low: np.ndarray,
        code_high: np.ndarray,
        rng: np.random.Generator,
    ) -> tuple[pd.DataFrame, np.ndarray] | None:
        """A valid design inside the box for the input point, or for a new input point drawn
        inside the box; None when none is found."""
        inputs_box = slice(0, len(self.space.inputs))
        for attempt in range(_INPUT_REDRAWS + 1):
            if attempt:
                unit = box.lower + (box.upper - box.lower) * rng.random(len(self.space.names))
                point = self._inputs_from_unit(unit[None, inputs_box])
            code = self._design_in_box(point, code_low, code_high, rng)
            if code is not None:
                return point, code
        return None

    def _design_in_box(
        self,
        point: pd.DataFrame,
        code_low: np.ndarray,
        code_high: np.ndarray,
        rng: np.random.Generator,
    ) -> np.ndarray | None:
        space = self.space
        if space.enumerable:
            values = {name: point[name].iloc[0] for name in space.constrained_inputs}
            valid = space.valid_design_codes(values)
            inside = valid[((valid >= code_low) & (valid <= code_high)).all(axis=1)]
            if len(inside) == 0:
                return None
            return np.asarray(inside[rng.integers(len(inside))], dtype=np.int64)
        trial = rng.integers(code_low, code_high + 1, size=(_BOX_TRIALS, len(space.design)))
        repeated = point.iloc[np.zeros(_BOX_TRIALS, dtype=np.int64)].reset_index(drop=True)
        ok = np.flatnonzero(space.is_valid(space.assemble(repeated, trial)))
        return trial[ok[0]] if len(ok) else None

    def describe(self) -> dict[str, Any]:
        """The variance measure in use and the current partitions (progress lines)."""
        return {
            "error": self.error,
            "partitions": len(self.partitions_),
            "allocated": [p.allocated for p in self.partitions_],
        }


class HVSrSampler(HVSSampler):
    """HVSr: hierarchical variance sampling on the relative variance (squared coefficient of
    variation), MLKAPS's default sub-sampler of GA-Adaptive."""

    error_kind: ErrorKind = "relative"


def _keep_new(space: Space, rows: pd.DataFrame, taken: set[tuple[Any, ...]]) -> pd.DataFrame:
    """Rows whose key is not in ``taken`` (which they join), first occurrence only."""
    keep = []
    for index, key in enumerate(space.key(rows)):
        if key not in taken:
            taken.add(key)
            keep.append(index)
    return rows.iloc[keep].reset_index(drop=True)
