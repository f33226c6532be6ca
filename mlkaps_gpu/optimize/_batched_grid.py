"""The grid side of the batched NSGA-II (:mod:`._batched`): design codes as keys and features,
the valid configurations of every grid point, the first populations drawn from them, and the
repair of invalid children for their own point.

Grid points that share the values of the inputs constraints mention share their valid designs,
so valid sets are kept per such group of points, and so is the repair: by lookup in a
:class:`~mlkaps_gpu.optimize._repair.RepairTable` where the space is enumerated and the table
fits, with the vectorised constraints and the nearest valid design (``Space.repair_codes``
where the space is not enumerated) otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mlkaps_gpu.optimize._repair import TABLE_LIMIT, RepairTable
from mlkaps_gpu.space import Space, nearest_codes


class DesignCodes:
    """Integer codes of a space's design parameters, and what a run computes from them.

    Attributes:
        upper: largest code of each design parameter (the variation operators' bounds).
        product: size of the design product; the key of a (point, configuration) is
            ``point x product`` plus the configuration's position in the product.
        code_type: the integer type codes travel as: 16 bits where every parameter fits (less
            memory to move), 64 otherwise.
    """

    def __init__(self, space: Space) -> None:
        self.space = space
        self.upper = space.design_sizes.astype(np.float64) - 1
        self.product = int(np.prod(space.design_sizes.astype(float)))
        #: code -> position in the design product (enumeration order); keys are built on it
        self.strides = np.r_[np.cumprod(space.design_sizes[::-1])[::-1][1:], 1].astype(np.int64)
        self.code_type = np.int16 if space.design_sizes.max(initial=1) < 2**15 else np.int64
        self._numeric = [p.numeric(p.domain_values()) for p in space.design]
        self._columns = [
            p.domain_values().astype(object)
            if p.kind == "categorical"
            else p.domain_values().astype(np.float64)
            for p in space.design
        ]

    def keys(self, points: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """One integer per (point, configuration) row."""
        return points.astype(np.int64) * self.product + codes @ self.strides

    def features(self, inputs: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Surrogate features of rows given their input features and design codes."""
        out = np.empty((len(codes), inputs.shape[1] + codes.shape[1]))
        out[:, : inputs.shape[1]] = inputs
        for d in range(codes.shape[1]):
            out[:, inputs.shape[1] + d] = self._numeric[d][codes[:, d]]
        return out

    def valid_mask(self, input_columns: dict[str, np.ndarray], codes: np.ndarray) -> np.ndarray:
        """Which rows (inputs given per row) satisfy every constraint."""
        n = len(codes)
        columns = dict(input_columns)
        for d, parameter in enumerate(self.space.design):
            columns[parameter.name] = self._columns[d][codes[:, d]]
        mask = np.ones(n, dtype=bool)
        for constraint in self.space.constraints:
            mask &= constraint.evaluate(columns, n)
        return mask


@dataclass
class GridContext:
    """What a run knows of its grid: inputs, groups of points sharing a valid set, lookups."""

    design: DesignCodes
    table: pd.DataFrame
    input_features: np.ndarray
    point_group: np.ndarray
    valid_sets: list[np.ndarray]
    repair_table: RepairTable | None
    #: constraint columns of the inputs, for spaces checked without a table
    input_columns: dict[str, np.ndarray]
    #: (points, design product), zero but while a generation marks its parents' positions
    slots: np.ndarray | None = None

    @classmethod
    def prepare(cls, design: DesignCodes, grid: pd.DataFrame, population: int) -> GridContext:
        """Inputs as features, groups of points sharing a valid set, and their lookup table."""
        space = design.space
        table = grid[space.input_names].reset_index(drop=True)
        point_group = np.zeros(len(table), dtype=np.int64)
        valid_sets: list[np.ndarray] = []
        groups = space._groups(table) if space.enumerable else []
        for index, (values, rows) in enumerate(groups):
            valid_sets.append(space.valid_design_codes(values).astype(np.int64))
            point_group[rows] = index
        repair = RepairTable(space, valid_sets) if RepairTable.fits(space, len(groups)) else None
        cells = len(table) * float(design.product)
        small = repair is not None and cells <= TABLE_LIMIT and population < 2**15
        return cls(
            design=design,
            slots=np.zeros((len(table), design.product), dtype=np.int16) if small else None,
            table=table,
            input_features=space.features(table, space.input_names),
            point_group=point_group,
            valid_sets=valid_sets,
            repair_table=repair,
            input_columns=space.columns(table) if repair is None else {},
        )

    def initial_codes(
        self, population: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Valid configurations drawn per point, and which points admit any."""
        space, n = self.design.space, population
        n_points, n_design = len(self.table), len(space.design)
        code_type = self.design.code_type
        if not space.enumerable:
            repeated = self.table.loc[self.table.index.repeat(n)].reset_index(drop=True)
            drawn, found = space.sample_designs(repeated, rng)
            alive = np.asarray(found.reshape(n_points, n).any(axis=1), dtype=bool)
            return drawn.reshape(n_points, n, n_design).astype(code_type), alive
        codes = np.zeros((n_points, n, n_design), dtype=code_type)
        alive = np.ones(n_points, dtype=bool)
        for group, valid in enumerate(self.valid_sets):
            rows = np.flatnonzero(self.point_group == group)
            if len(valid) == 0:
                alive[rows] = False
                continue
            for row in rows:
                codes[row] = valid[rng.choice(len(valid), size=n, replace=len(valid) < n)]
        return codes, alive

    def repair(
        self, points: np.ndarray, codes: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Nearest valid configuration for each invalid row, for its own point; and the rows'
        keys."""
        groups = self.point_group[points]
        if self.repair_table is not None:
            codes, index = self.repair_table.repair_with_index(groups, codes)
            return codes, points.astype(np.int64) * self.design.product + index
        repaired = self._repair_by_constraints(points, codes, rng)
        return repaired, self.design.keys(points, repaired)

    def _repair_by_constraints(
        self, points: np.ndarray, codes: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """Repair where there is no table: the constraints, then the nearest valid design."""
        space = self.design.space
        groups = self.point_group[points]
        inputs = {name: column[points] for name, column in self.input_columns.items()}
        invalid = np.flatnonzero(~self.design.valid_mask(inputs, codes))
        if len(invalid) == 0:
            return codes
        codes = codes.copy()
        if space.enumerable:
            for group in np.unique(groups[invalid]):
                rows = invalid[groups[invalid] == group]
                valid = self.valid_sets[group]
                if len(valid):
                    codes[rows] = nearest_codes(codes[rows], valid)
            return codes
        table = self.table.iloc[points[invalid]].reset_index(drop=True)
        codes[invalid] = space.repair_codes(table, codes[invalid], rng)
        return codes
