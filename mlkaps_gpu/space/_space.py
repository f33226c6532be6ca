"""The joint input x design search space with its constraints.

Tables are pandas DataFrames with one column per parameter. Design parameters are handled through
integer *codes* (the index of a value in the parameter's ``domain_values``). Where the Cartesian
product of the design values is small enough it is enumerated once, and the valid design set of an
input point is a mask over it (cached per distinct value of the inputs the constraints mention);
otherwise sampling falls back to rejection and repair to a local search.

:class:`Space` holds the parameters, the constraints, the codes and the valid design sets; what
it does with them lives beside it as functions of a space, which its methods call: restrictions
to the designs that exist (``_restrictions``), valid sampling (``_valid_sampling``), repair and
neighbours (``_neighbours``) and input grids (``_grid``).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.space._constraints import Constraint, parse_constraint
from mlkaps_gpu.space._grid import cartesian_grid, check_grid, grid, grid_size
from mlkaps_gpu.space._listed import ListedRows
from mlkaps_gpu.space._neighbours import NeighbourKind, neighbour_codes, repair_codes
from mlkaps_gpu.space._parameters import Parameter, SpaceError
from mlkaps_gpu.space._restrictions import (
    NO_CODES,
    allowed_designs_restrict,
    allowed_key,
    allowed_rows,
    listed_design_codes,
    listed_points,
    scalar_value,
    usable_points,
    with_allowed_designs,
    with_listed_rows,
)
from mlkaps_gpu.space._valid_sampling import (
    check_satisfiable,
    complete_with_valid_designs,
    sample_designs,
    sample_inputs,
)

#: Largest Cartesian product of design values that is enumerated.
DEFAULT_ENUMERATE_LIMIT = 2_000_000
#: Largest product that is re-evaluated per input point when constraints involve inputs.
PER_INPUT_ENUMERATE_LIMIT = 200_000
_CACHE_SIZE = 4096
#: Guards the lazily built product and the valid-set cache of every space: grid chunks run in
#: threads (and in-process Dask workers) that share one space.
_CACHE_LOCK = threading.RLock()
#: Most design configurations a space may have: every configuration is indexed by an integer
#: that must stay exact in float64 (2**53; grid keys, :data:`MAX_GRID_KEYS`, fit in int64).
MAX_DESIGN_CONFIGURATIONS = 2**53


class Space:
    """Input parameters, design parameters and constraints over both.

    Args:
        inputs: parameters describing the problem (matrix sizes, the GPU...).
        design: parameters the tuner chooses (block sizes, variants...).
        constraints: expressions in the constraint language (see ``parse_constraint``).
        enumerate_limit: largest design Cartesian product that is enumerated.
    """

    def __init__(
        self,
        inputs: Sequence[Parameter],
        design: Sequence[Parameter],
        constraints: Sequence[str] = (),
        *,
        enumerate_limit: int = DEFAULT_ENUMERATE_LIMIT,
    ) -> None:
        self.inputs = list(inputs)
        self.design = list(design)
        if not self.design:
            raise SpaceError("the space needs at least one design parameter")
        seen: set[str] = set()
        for parameter in [*self.inputs, *self.design]:
            if parameter.name in seen:
                raise SpaceError(f"duplicate parameter name '{parameter.name}'")
            seen.add(parameter.name)
        self.parameters: dict[str, Parameter] = {p.name: p for p in [*self.inputs, *self.design]}
        self.constraints: list[Constraint] = [
            parse_constraint(text, self.parameters) for text in constraints
        ]
        self.input_names = [p.name for p in self.inputs]
        self.design_names = [p.name for p in self.design]
        self.names = [*self.input_names, *self.design_names]
        inputs_only = set(self.input_names)
        #: constraints on inputs only (``n2 <= n1``): they restrict the input domain (sampling,
        #: grids, the header's domain check), never the choice of a design
        self.input_constraints = [c for c in self.constraints if c.names and c.names <= inputs_only]
        #: constraints that involve a design parameter (or none: a constant)
        self.design_constraints = [c for c in self.constraints if c not in self.input_constraints]
        mentioned = set().union(*(c.names for c in self.constraints))
        #: inputs that some constraint mentions: the valid design set depends on these only
        self.constrained_inputs = [n for n in self.input_names if n in mentioned]
        by_design = set().union(*(c.names for c in self.design_constraints))
        #: inputs of constraints that involve a design parameter: the valid designs of a point
        #: inside the input domain are a mask over the product that depends on these only
        self.mask_inputs = [n for n in self.input_names if n in by_design]
        domain = set().union(*(c.names for c in self.input_constraints))
        #: inputs of the constraints on inputs only: outside the domain these leave, an input
        #: point has no valid design at all
        self.domain_inputs = [n for n in self.input_names if n in domain]
        self.design_sizes = np.array([p.n_values for p in self.design], dtype=np.int64)
        self.design_product = math.prod(int(p.n_values) for p in self.design)
        if self.design_product > MAX_DESIGN_CONFIGURATIONS:
            raise SpaceError(
                f"the design space has {self.design_product:.3e} configurations "
                f"({' x '.join(str(p.n_values) for p in self.design)} values), more than "
                f"2**53 = {MAX_DESIGN_CONFIGURATIONS:,}, the most that are indexed exactly; "
                "give fewer design parameters or fewer values"
            )
        self.enumerate_limit = enumerate_limit
        self._product_codes: np.ndarray | None = None
        self._product_columns: dict[str, np.ndarray] | None = None
        self._valid_cache: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
        #: inputs held at one value by sampling and grids (see ``with_fixed_inputs``)
        self.fixed_inputs: dict[str, Any] = {}
        #: the only designs that exist, per value of one input (see ``with_allowed_designs``)
        self.allowed_designs: tuple[str | None, dict[str | None, np.ndarray]] | None = None
        #: the only (input point, design) rows that exist (see ``with_listed_rows``)
        self.listed_rows: ListedRows | None = None
        #: listed rows already satisfy every design constraint: draws and repairs use them alone
        self._listed_fast = False
        self._place = radix(self.design_sizes)

    def with_fixed_inputs(self, values: Mapping[str, Any]) -> Space:
        """A copy whose sampling and grids hold some inputs at one value.

        Domains, codes and feature encodings stay those of the full space, so measurements of
        the restricted space and of the full one (other architectures, say) share one model.
        """
        for name, value in values.items():
            if name not in self.input_names:
                raise SpaceError(f"cannot fix '{name}': not an input (inputs: {self.input_names})")
            if not self.parameters[name].contains(np.array([value]))[0]:
                raise SpaceError(f"cannot fix '{name}' to {value!r}: outside its domain")
        copy = self._copy()
        copy.fixed_inputs = dict(values)
        return copy

    def with_allowed_designs(
        self, input_name: str | None, designs: Mapping[Any, pd.DataFrame]
    ) -> Space:
        """A copy whose valid configurations are, besides satisfying the constraints, among
        ``designs``: per value of the input ``input_name`` (None: one table, key None, for
        every input point), the design rows that exist (a replay's recorded configurations:
        any other is known to be absent before it is measured). Input values without a table
        have no valid design. Domains, codes and features stay those of this space.
        """
        return with_allowed_designs(self, input_name, designs)

    def with_listed_rows(self, table: pd.DataFrame, names: Sequence[str]) -> Space:
        """A copy whose only valid rows are those of ``table``: per input point over the inputs
        ``names`` (a table replay's recorded shapes), the designs listed there. Inputs are drawn
        among the recorded points (:meth:`sample_inputs`, :meth:`inputs_from_unit`), a design
        outside the point's list is invalid (:meth:`is_valid`), repair goes to the nearest
        listed design of the point, and a point that is not recorded has no valid design. Rows
        that break a constraint are dropped. Domains, codes and features stay this space's.

        Args:
            table: one row per listed (point, design): a column per name and per design
                parameter (more columns are ignored; repeated rows count once).
            names: the inputs that key the points (all the inputs of a table replay).

        Raises:
            SpaceError: a name is not an input, a column is missing, or no row is valid.
        """
        return with_listed_rows(self, table, names)

    def listed_points(self) -> pd.DataFrame:
        """The recorded input points that have a listed design (all the inputs; fixed inputs
        held, points outside them left out): a table replay's grid.

        Raises:
            SpaceError: the space has no listed rows.
        """
        return listed_points(self)

    def listed_design_codes(self, inputs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
        """Every listed design of every input row at once: ``(row of each design, codes)``,
        rows in order (none for a row at no recorded point); None where the listed designs
        alone are not the valid set (no listed rows, or constraints on other inputs)."""
        return listed_design_codes(self, inputs)

    def inputs_from_unit(self, unit: np.ndarray) -> pd.DataFrame:
        """Input points from points of the unit cube (one column per input, in order), as
        ``Parameter.from_unit`` maps them (fixed inputs held); with listed rows, each is the
        nearest recorded point instead (samplers that place inputs in the cube use this)."""
        unit = np.asarray(unit, dtype=np.float64)
        unit = unit.reshape(len(unit), -1) if unit.ndim != 2 else unit
        table = pd.DataFrame(
            {p.name: p.from_unit(unit[:, i], discrete=False) for i, p in enumerate(self.inputs)},
            index=range(len(unit)),
        )
        listed = self.listed_rows
        if listed is not None and len(unit):
            positions = [self.input_names.index(n) for n in listed.names]
            parameters = [self.parameters[n] for n in listed.names]
            nearest = listed.nearest_points(
                unit[:, positions], parameters, allowed=usable_points(self)
            )
            for name in listed.names:
                table[name] = listed.points[name].to_numpy()[nearest]
            table = table.astype({p.name: p.dtype for p in self.inputs})
        return self.apply_fixed(table) if self.fixed_inputs else table

    def allowed_designs_restrict(self) -> bool:
        """Whether the allowed designs leave out a configuration that the constraints allow at
        some input value (True where that cannot be told by enumeration: a space too large, or
        valid designs that depend on other inputs)."""
        return allowed_designs_restrict(self)

    def _copy(self, *, allowed: bool = True) -> Space:
        """A fresh space of the same parameters, constraints and fixed inputs, and with
        ``allowed`` the same allowed designs."""
        copy = Space(
            self.inputs,
            self.design,
            [c.source for c in self.constraints],
            enumerate_limit=self.enumerate_limit,
        )
        copy.fixed_inputs = dict(self.fixed_inputs)
        if allowed and (self.allowed_designs is not None or self.listed_rows is not None):
            copy.allowed_designs = self.allowed_designs
            copy.listed_rows = self.listed_rows
            copy._listed_fast = self._listed_fast
            copy.constrained_inputs = list(self.constrained_inputs)
            copy.mask_inputs = list(self.mask_inputs)
        return copy

    def _allowed(self, columns: Mapping[str, Any], n_rows: int) -> np.ndarray:
        """Which rows' designs are among the allowed ones (all rows without a restriction)."""
        return allowed_rows(self, columns, n_rows)

    def apply_fixed(self, inputs: pd.DataFrame) -> pd.DataFrame:
        """Overwrite the fixed inputs' columns of an input table."""
        for name, value in self.fixed_inputs.items():
            inputs[name] = pd.Series([value] * len(inputs), dtype=self.parameters[name].dtype)
        return inputs

    # ------------------------------------------------------------------------ description
    def __repr__(self) -> str:
        return (
            f"Space(inputs={self.input_names}, design={self.design_names}, "
            f"constraints={[c.source for c in self.constraints]})"
        )

    @property
    def enumerable(self) -> bool:
        """Whether the valid design set is found by enumeration (else by rejection)."""
        if self.design_product > self.enumerate_limit:
            return False
        return not self.mask_inputs or self.design_product <= PER_INPUT_ENUMERATE_LIMIT

    # ----------------------------------------------------------------------------- columns
    def columns(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        """Columns as the constraint evaluator wants them (float64, or object for strings)."""
        out: dict[str, np.ndarray] = {}
        for name in self.names:
            if name not in table:
                continue
            parameter = self.parameters[name]
            column = table[name].to_numpy()
            if parameter.kind == "categorical":
                out[name] = column.astype(object)
            else:
                out[name] = column.astype(np.float64)
        return out

    def satisfies_constraints(self, table: pd.DataFrame) -> np.ndarray:
        """Which rows satisfy every constraint (domains are not checked)."""
        return self._satisfies(self.columns(table), len(table), self.constraints)

    def is_valid(self, table: pd.DataFrame) -> np.ndarray:
        """Which rows have every value in its domain and satisfy every constraint."""
        missing = [n for n in self.names if n not in table]
        if missing:
            raise SpaceError(f"table lacks columns {missing}")
        result = np.ones(len(table), dtype=bool)
        for parameter in self.inputs:
            result &= parameter.contains(table[parameter.name].to_numpy())
        for parameter in self.design:
            result &= parameter.codes(table[parameter.name].to_numpy()) >= 0
        if result.any():
            result &= self.satisfies_constraints(table)
        return result

    # ------------------------------------------------------------------------------ codes
    def design_codes(self, table: pd.DataFrame) -> np.ndarray:
        """Integer codes (n_rows x n_design) of the design columns; -1 outside the domain."""
        codes = np.empty((len(table), len(self.design)), dtype=np.int64)
        for index, parameter in enumerate(self.design):
            codes[:, index] = parameter.codes(table[parameter.name].to_numpy())
        return codes

    def design_from_codes(self, codes: np.ndarray) -> pd.DataFrame:
        """Design table from integer codes."""
        codes = np.asarray(codes, dtype=np.int64).reshape(-1, len(self.design))
        # explicit dtypes: pandas would otherwise turn categorical values into its string dtype
        return pd.DataFrame(
            {
                p.name: pd.Series(p.domain_values()[codes[:, i]], dtype=p.dtype)
                for i, p in enumerate(self.design)
            }
        )

    def features(self, table: pd.DataFrame, names: Sequence[str] | None = None) -> np.ndarray:
        """Numeric feature matrix for models (category index for categoricals)."""
        names = list(names) if names is not None else self.names
        out = np.empty((len(table), len(names)), dtype=np.float64)
        for index, name in enumerate(names):
            out[:, index] = self.parameters[name].numeric(table[name].to_numpy())
        return out

    @property
    def categorical_features(self) -> list[int]:
        """Positions (in ``names``) of categorical parameters."""
        return [i for i, n in enumerate(self.names) if self.parameters[n].kind == "categorical"]

    def key(self, table: pd.DataFrame) -> list[tuple[Any, ...]]:
        """One hashable key per row over every parameter (for de-duplication)."""
        columns = [table[n].to_numpy().tolist() for n in self.names]
        return list(zip(*columns, strict=True))

    # ------------------------------------------------------------------ valid design sets
    def _product(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        with _CACHE_LOCK:
            if self._product_codes is None or self._product_columns is None:
                grids = np.indices(tuple(int(s) for s in self.design_sizes), dtype=np.int32)
                codes = grids.reshape(len(self.design), -1).T
                columns: dict[str, np.ndarray] = {}
                for index, parameter in enumerate(self.design):
                    values = parameter.domain_values()[codes[:, index]]
                    columns[parameter.name] = (
                        values.astype(object)
                        if parameter.kind == "categorical"
                        else values.astype(np.float64)
                    )
                self._product_codes, self._product_columns = codes, columns
            return self._product_codes, self._product_columns

    @classmethod
    def from_kernel_tuner(
        cls,
        tune_params: Mapping[str, Any],
        restrictions: str | Sequence[str] | None = None,
        **options: Any,
    ) -> Space:
        """The design space of Kernel Tuner's ``tune_params`` and restriction strings
        (:func:`~mlkaps_gpu.space._kernel_tuner.space_from_kernel_tuner`: ``inputs``,
        ``max_threads``, ``block_size_names``)."""
        from mlkaps_gpu.space._kernel_tuner import space_from_kernel_tuner

        return space_from_kernel_tuner(tune_params, restrictions, **options)

    def valid_design_codes(self, input_values: Mapping[str, Any] | None = None) -> np.ndarray:
        """Codes of every valid design for one input point (enumerable spaces only).

        Args:
            input_values: values of the inputs (those mentioned by constraints are needed).
        """
        if not self.enumerable:
            raise SpaceError(
                f"design space of {self.design_product} configurations is not enumerated"
            )
        input_values = input_values or {}
        if self.input_constraints and all(n in input_values for n in self.domain_inputs):
            point = {
                n: scalar_value(input_values[n])
                if self.parameters[n].kind == "categorical"
                else np.float64(input_values[n])
                for n in self.domain_inputs
            }
            if not self._satisfies(point, 1, self.input_constraints)[0]:
                return np.zeros((0, len(self.design)), dtype=np.int32)
        key = tuple(scalar_value(input_values[n]) for n in self.mask_inputs)
        with _CACHE_LOCK:
            cached = self._valid_cache.get(key)
            if cached is not None:
                self._valid_cache.move_to_end(key)
                return cached
        # The mask is computed outside the lock: two threads missing the same key at once both
        # compute it (the same array), rather than every thread waiting on one evaluation.
        codes, columns = self._product()
        scope: dict[str, Any] = dict(columns)
        for name in self.mask_inputs:
            value = input_values[name]
            categorical = self.parameters[name].kind == "categorical"
            scope[name] = value if categorical else np.float64(value)
        mask = np.ones(len(codes), dtype=bool)
        for constraint in self.design_constraints:
            mask &= constraint.evaluate(scope, len(codes))
        if self.listed_rows is not None:
            listed = self.listed_rows
            at = int(listed.point_ids({n: input_values[n] for n in listed.names}, 1)[0])
            mask &= np.isin(codes.astype(np.int64) @ self._place, listed.designs_of(at))
        elif self.allowed_designs is not None:
            by, allowed = self.allowed_designs
            value = None if by is None else allowed_key(input_values[by])
            mask &= np.isin(codes.astype(np.int64) @ self._place, allowed.get(value, NO_CODES))
        valid = codes[mask]
        with _CACHE_LOCK:
            self._valid_cache[key] = valid
            while len(self._valid_cache) > _CACHE_SIZE:
                self._valid_cache.popitem(last=False)
        return valid

    def _groups(self, inputs: pd.DataFrame) -> list[tuple[dict[str, Any], np.ndarray]]:
        """Rows grouped by the values of the constrained inputs: (values, row indices)."""
        names = self.constrained_inputs
        if not names:
            return [({}, np.arange(len(inputs)))]
        keys = inputs[names]
        grouped = keys.groupby(names, sort=False, dropna=False).indices
        groups = []
        for key, rows in grouped.items():
            values = key if isinstance(key, tuple) else (key,)
            groups.append((dict(zip(names, values, strict=True)), rows))
        return groups

    # ---------------------------------------------------------------------------- sampling
    def sample_inputs(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """Uniform (log-uniform where ``log``) random input points; with constraints on inputs
        only, uniform over the points that satisfy them (rejection)."""
        return sample_inputs(self, n, rng)

    def satisfies_input_constraints(self, inputs: pd.DataFrame) -> np.ndarray:
        """Which input rows lie in the input domain the constraints on inputs only leave."""
        columns = self.columns(inputs)
        return self._satisfies(columns, len(inputs), self.input_constraints)

    def sample_designs(
        self, inputs: pd.DataFrame, rng: np.random.Generator, *, max_rounds: int = 1000
    ) -> tuple[np.ndarray, np.ndarray]:
        """A uniformly drawn valid design for each input row.

        Returns:
            ``(codes, found)``: design codes per row and whether a valid one was found (an input
            point may admit no valid design at all).
        """
        return sample_designs(self, inputs, rng, max_rounds=max_rounds)

    def _design_columns(self, codes: np.ndarray) -> dict[str, np.ndarray]:
        """Design columns as the constraint evaluator wants them, from codes."""
        out: dict[str, np.ndarray] = {}
        for index, parameter in enumerate(self.design):
            values = parameter.domain_values()[codes[:, index]]
            categorical = parameter.kind == "categorical"
            out[parameter.name] = values.astype(object if categorical else np.float64)
        return out

    def _satisfies(
        self,
        columns: Mapping[str, Any],
        n_rows: int,
        constraints: Sequence[Constraint] | None = None,
    ) -> np.ndarray:
        """Which rows satisfy ``constraints`` (default: those that involve a design parameter;
        the input domain is the sampler's and the grid's business)."""
        result = np.ones(n_rows, dtype=bool)
        for constraint in self.design_constraints if constraints is None else constraints:
            result &= constraint.evaluate(columns, n_rows)
        design = constraints is None or constraints is self.constraints
        restricted = self.allowed_designs is not None or self.listed_rows is not None
        if restricted and design and result.any():
            result &= self._allowed(columns, n_rows)
        return result

    def sample_valid(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """``n`` random valid rows (inputs uniform, design uniform over the valid set)."""
        if n <= 0:
            return self.empty_table()
        inputs = self.sample_inputs(n, rng)
        return self.complete_with_valid_designs(inputs, rng)

    def complete_with_valid_designs(
        self, inputs: pd.DataFrame, rng: np.random.Generator, *, max_redraws: int = 100
    ) -> pd.DataFrame:
        """Add a valid random design to each input row; inputs admitting none, or outside the
        input domain that constraints on inputs only leave, are redrawn."""
        return complete_with_valid_designs(self, inputs, rng, max_redraws=max_redraws)

    def assemble(self, inputs: pd.DataFrame, codes: np.ndarray) -> pd.DataFrame:
        """Table of inputs and the designs given by codes, with proper dtypes."""
        table = inputs.reset_index(drop=True).copy()
        design = self.design_from_codes(codes)
        for name in self.design_names:
            table[name] = design[name]
        for name in self.input_names:
            table[name] = table[name].astype(self.parameters[name].dtype)
        return table[self.names]

    def empty_table(self) -> pd.DataFrame:
        """A table of no rows with a column per parameter (inputs, then design), each of its
        parameter's type: what samplers return when they have nothing to propose, ready to
        concatenate with tables of rows."""
        return pd.DataFrame({n: pd.Series(dtype=self.parameters[n].dtype) for n in self.names})

    def check_satisfiable(self, rng: np.random.Generator, *, trials: int = 64) -> None:
        """Raise SpaceError if no configuration satisfies the constraints (checked on the
        input grid corners and random inputs)."""
        return check_satisfiable(self, rng, trials=trials)

    # ------------------------------------------------------------------------------ repair
    def repair(self, table: pd.DataFrame, rng: np.random.Generator | None = None) -> pd.DataFrame:
        """Replace each invalid design by the nearest valid one for the row's inputs.

        Distance is the sum of absolute code differences (as Kernel Tuner). Valid rows are
        unchanged. Ties go to the first valid design in enumeration order.
        """
        codes = self.design_codes(table)
        repaired = self.repair_codes(table[self.input_names].reset_index(drop=True), codes, rng)
        return self.assemble(table[self.input_names], repaired)

    def repair_codes(
        self,
        inputs: pd.DataFrame,
        codes: np.ndarray,
        rng: np.random.Generator | None = None,
    ) -> np.ndarray:
        """Code-level repair: ``codes`` (n x n_design, out-of-range allowed) -> valid codes."""
        return repair_codes(self, inputs, codes, rng)

    # -------------------------------------------------------------------------- neighbours
    def neighbours(
        self, row: Mapping[str, Any] | pd.Series, kind: NeighbourKind = "Hamming"
    ) -> pd.DataFrame:
        """Valid neighbours of one configuration (its inputs fixed).

        - ``Hamming``: differs in exactly one design parameter;
        - ``strictly_adjacent``: every code within one step, at least one differing;
        - ``adjacent``: the valid designs at the smallest Chebyshev code distance (>= 1),
          i.e. the nearest ring of valid configurations, stepping over invalid ones.
        """
        inputs = pd.DataFrame({n: [row[n]] for n in self.input_names}, index=range(1))
        here = self.design_codes(pd.DataFrame({n: [row[n]] for n in self.design_names}))[0]
        chosen = self.neighbour_codes(row, here, kind)
        return self.assemble(_repeat(inputs, len(chosen)), chosen)

    def neighbour_codes(
        self, inputs: Mapping[str, Any], here: np.ndarray, kind: NeighbourKind = "Hamming"
    ) -> np.ndarray:
        """Design codes of the valid neighbours of the design ``here`` (codes) at the input
        point ``inputs`` (every input's value): :meth:`neighbours` without building tables,
        for callers that work on codes."""
        return neighbour_codes(self, inputs, here, kind)

    # -------------------------------------------------------------------------------- grids
    def grid(self, sizes: int | Mapping[str, int]) -> pd.DataFrame:
        """Cartesian grid over the inputs: regular, geometric for log parameters, every value
        of categoricals, without the points that constraints on inputs only exclude. ``sizes``
        is one size for all inputs or a size per input name.

        Raises:
            SpaceError: unknown inputs, a grid too large to index (see :meth:`check_grid`), or
                no grid point inside the constrained input domain.
        """
        return grid(self, sizes)

    def grid_size(self, sizes: int | Mapping[str, int]) -> int:
        """Points of the Cartesian grid :meth:`grid` starts from (before any constraint)."""
        return grid_size(self, sizes)

    def check_grid(self, sizes: int | Mapping[str, int]) -> None:
        """Refuse a grid whose points x design configurations exceed :data:`MAX_GRID_KEYS`
        (the optimizer keys every (point, configuration) pair with one int64)."""
        return check_grid(self, sizes)

    def _cartesian_grid(self, sizes: int | Mapping[str, int]) -> pd.DataFrame:
        return cartesian_grid(self, sizes)


def radix(sizes: np.ndarray) -> np.ndarray:
    """Row-major place values of a mixed-radix number with digit ranges ``sizes``: the flat
    index of design codes ``c`` in the design product is ``c @ radix(design_sizes)``."""
    sizes = np.asarray(sizes, dtype=np.int64)
    out = np.ones(len(sizes), dtype=np.int64)
    for index in range(len(sizes) - 2, -1, -1):
        out[index] = out[index + 1] * sizes[index + 1]
    return out


def _repeat(row: pd.DataFrame, n: int) -> pd.DataFrame:
    """A one-row table repeated ``n`` times (``n`` may be 0; the table may have no columns)."""
    return row.iloc[np.zeros(n, dtype=np.int64)].reset_index(drop=True)
