"""The joint input x design search space with its constraints.

Tables are pandas DataFrames with one column per parameter. Design parameters are handled through
integer *codes* (the index of a value in the parameter's ``domain_values``). Where the Cartesian
product of the design values is small enough it is enumerated once, and the valid design set of an
input point is a mask over it (cached per distinct value of the inputs the constraints mention);
otherwise sampling falls back to rejection and repair to a local search.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from mlkaps_gpu.space._constraints import Constraint, parse_constraint
from mlkaps_gpu.space._listed import ListedRows, PointIndex, lookup_values
from mlkaps_gpu.space._parameters import Parameter, SpaceError

NeighbourKind = Literal["strictly_adjacent", "adjacent", "Hamming"]
NEIGHBOUR_KINDS: tuple[str, ...] = ("strictly_adjacent", "adjacent", "Hamming")

#: Largest Cartesian product of design values that is enumerated.
DEFAULT_ENUMERATE_LIMIT = 2_000_000
#: Largest product that is re-evaluated per input point when constraints involve inputs.
PER_INPUT_ENUMERATE_LIMIT = 200_000
_CACHE_SIZE = 4096
#: Guards the lazily built product and the valid-set cache of every space: grid chunks run in
#: threads (and in-process Dask workers) that share one space.
_CACHE_LOCK = threading.RLock()
#: Rejection sampling: candidates evaluated per round, and at most per pending row.
_REJECTION_BATCH = 4096
_REJECTION_PER_ROW = 1024
#: Rejection rounds for redrawn inputs (the first draw has ``max_rounds``).
_REDRAW_ROUNDS = 10
#: Most candidates one Chebyshev ring of a non-enumerated space is searched with.
_RING_LIMIT = 1 << 20
#: Most design configurations a space may have: every configuration is indexed by an integer
#: that must stay exact in float64 (2**53) ...
MAX_DESIGN_CONFIGURATIONS = 2**53
#: ... and grid point x configuration keys of the optimizer must fit in int64 with room to spare.
MAX_GRID_KEYS = 2**62
#: Rejection rounds when drawing inputs that satisfy the constraints on inputs only.
_INPUT_ROUNDS = 1000


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
        if input_name is not None and input_name not in self.input_names:
            raise SpaceError(f"cannot restrict designs by '{input_name}': not an input")
        allowed: dict[str | None, np.ndarray] = {}
        for value, table in designs.items():
            codes = self.design_codes(table[self.design_names])
            known = np.all(codes >= 0, axis=1)
            allowed[_allowed_key(value)] = np.unique(codes[known] @ self._place)
        copy = self._copy(allowed=False)
        copy.allowed_designs = (input_name, allowed)
        if input_name is not None:  # the valid design set now depends on this input
            for attribute in ("constrained_inputs", "mask_inputs"):
                names = set(getattr(copy, attribute)) | {input_name}
                setattr(copy, attribute, [n for n in copy.input_names if n in names])
        return copy

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
        names = list(names)
        unknown = [n for n in names if n not in self.input_names]
        if unknown or not names:
            raise SpaceError(
                f"cannot key listed rows by {unknown or names}: not inputs "
                f"(inputs: {self.input_names})"
            )
        missing = [n for n in [*names, *self.design_names] if n not in table]
        if missing:
            raise SpaceError(f"listed rows lack columns {missing}")
        rows = table[[*names, *self.design_names]].reset_index(drop=True)
        codes = self.design_codes(rows)
        inside = np.all(codes >= 0, axis=1)
        for name in names:
            inside &= self.parameters[name].contains(rows[name].to_numpy())
        plain = self._copy(allowed=False)
        keyed = set(names) | set(self.design_names)
        checked = [c for c in self.constraints if c.names <= keyed]
        if inside.any() and checked:
            inside &= plain._satisfies(plain.columns(rows), len(rows), checked)
        rows, codes = rows[inside].reset_index(drop=True), codes[inside]
        if rows.empty:
            raise SpaceError("no listed row lies in the space's domains and constraints")
        index = PointIndex([self.parameters[n] for n in names], rows)
        listed = ListedRows(
            index, index.points(rows), index.row_ids, codes, self._place, self.design_product
        )
        copy = plain
        copy.listed_rows = listed
        copy._listed_fast = all(c.names <= keyed for c in copy.design_constraints)
        for attribute in ("constrained_inputs", "mask_inputs"):
            chosen = set(getattr(copy, attribute)) | set(names)
            setattr(copy, attribute, [n for n in copy.input_names if n in chosen])
        return copy

    def listed_points(self) -> pd.DataFrame:
        """The recorded input points that have a listed design (all the inputs; fixed inputs
        held, points outside them left out): a table replay's grid.

        Raises:
            SpaceError: the space has no listed rows.
        """
        listed = self.listed_rows
        if listed is None:
            raise SpaceError("the space has no listed rows (see with_listed_rows)")
        chosen = np.flatnonzero(self._usable_points())
        points = listed.points.iloc[chosen].reset_index(drop=True)
        table = pd.DataFrame(index=range(len(points)))
        for parameter in self.inputs:
            name = parameter.name
            if name in points:
                table[name] = points[name].to_numpy()
            elif name in self.fixed_inputs:
                table[name] = self.fixed_inputs[name]
            else:
                table[name] = parameter.grid(1)[0]
        return table.astype({p.name: p.dtype for p in self.inputs})

    def listed_design_codes(self, inputs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
        """Every listed design of every input row at once: ``(row of each design, codes)``,
        rows in order (none for a row at no recorded point); None where the listed designs
        alone are not the valid set (no listed rows, or constraints on other inputs)."""
        listed = self.listed_rows
        if listed is None or not self._listed_fast:
            return None
        points = listed.point_ids({n: inputs[n].to_numpy() for n in listed.names}, len(inputs))
        safe = np.maximum(points, 0)
        counts = np.where(points >= 0, listed.counts[safe], 0)
        owners = np.repeat(np.arange(len(inputs), dtype=np.int64), counts)
        starts = np.repeat(
            listed.offsets[safe] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts
        )
        take = starts + np.arange(len(owners), dtype=np.int64)
        return owners, listed.codes[take]

    def _usable_points(self) -> np.ndarray:
        """Which recorded points have a listed design and agree with the fixed inputs."""
        listed = self.listed_rows
        assert listed is not None
        usable = listed.counts > 0
        for name, value in self.fixed_inputs.items():
            if name in listed.names:
                kind = self.parameters[name].kind
                column = lookup_values(listed.points[name].to_numpy(), kind)
                usable &= column == lookup_values([value], kind)[0]
        return usable

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
                unit[:, positions], parameters, allowed=self._usable_points()
            )
            for name in listed.names:
                table[name] = listed.points[name].to_numpy()[nearest]
            table = table.astype({p.name: p.dtype for p in self.inputs})
        return self.apply_fixed(table) if self.fixed_inputs else table

    def allowed_designs_restrict(self) -> bool:
        """Whether the allowed designs leave out a configuration that the constraints allow at
        some input value (True where that cannot be told by enumeration: a space too large, or
        valid designs that depend on other inputs)."""
        if self.listed_rows is not None:
            return True
        if self.allowed_designs is None:
            return False
        name, allowed = self.allowed_designs
        plain = self._copy(allowed=False)
        if not plain.enumerable or plain.mask_inputs:
            return True
        valid = plain.valid_design_codes().astype(np.int64) @ self._place
        if name is None:
            keys: list[str | None] = [None]
        else:
            parameter = self.parameters[name]
            if parameter.values is None and parameter.kind not in ("categorical", "bool"):
                return True
            keys = [_allowed_key(v) for v in parameter.domain_values().tolist()]
        return any(not np.isin(valid, allowed.get(key, _NONE)).all() for key in keys)

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
        if self.allowed_designs is None and self.listed_rows is None:
            return np.ones(n_rows, dtype=bool)
        codes = np.column_stack(
            [np.broadcast_to(p.codes(np.atleast_1d(columns[p.name])), n_rows) for p in self.design]
        )
        flat = np.where(np.all(codes >= 0, axis=1), codes @ self._place, -1)
        if self.listed_rows is not None:
            points = self.listed_rows.point_ids(columns, n_rows)
            return self.listed_rows.contains(points, flat)
        assert self.allowed_designs is not None
        name, allowed = self.allowed_designs
        if name is None:
            return np.isin(flat, allowed.get(None, _NONE))
        values = np.broadcast_to(np.atleast_1d(np.asarray(columns[name], dtype=object)), n_rows)
        keys = np.array([_allowed_key(v) for v in values.tolist()], dtype=object)
        result = np.zeros(n_rows, dtype=bool)
        for key in set(keys.tolist()):
            rows = keys == key
            result[rows] = np.isin(flat[rows], allowed.get(key, _NONE))
        return result

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
                n: _scalar(input_values[n])
                if self.parameters[n].kind == "categorical"
                else np.float64(input_values[n])
                for n in self.domain_inputs
            }
            if not self._satisfies(point, 1, self.input_constraints)[0]:
                return np.zeros((0, len(self.design)), dtype=np.int32)
        key = tuple(_scalar(input_values[n]) for n in self.mask_inputs)
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
            value = None if by is None else _allowed_key(input_values[by])
            mask &= np.isin(codes.astype(np.int64) @ self._place, allowed.get(value, _NONE))
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
        table = self._draw_inputs(n, rng)
        if self.listed_rows is not None and n > 0:
            # only recorded points exist: uniform over those (constraints were applied to them)
            listed = self.listed_rows
            chosen = listed.draw_points(n, rng, allowed=self._usable_points())
            for name in listed.names:
                table[name] = listed.points[name].to_numpy()[chosen]
            return table.astype({p.name: p.dtype for p in self.inputs})
        if not self.input_constraints or n == 0:
            return table
        accepted = [table[self.satisfies_input_constraints(table)]]
        count = len(accepted[0])
        for _ in range(_INPUT_ROUNDS):
            if count >= n:
                return pd.concat(accepted, ignore_index=True).head(n)
            fresh = self._draw_inputs(max(2 * (n - count), 64), rng)
            fresh = fresh[self.satisfies_input_constraints(fresh)]
            accepted.append(fresh)
            count += len(fresh)
        raise SpaceError(
            "no input point satisfies the constraints on inputs only: "
            + "; ".join(c.source for c in self.input_constraints)
        )

    def _draw_inputs(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        table = pd.DataFrame(
            {p.name: p.sample(n, rng, discrete=False) for p in self.inputs}, index=range(n)
        )
        return self.apply_fixed(table) if self.fixed_inputs else table

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
        n = len(inputs)
        if self.listed_rows is not None and self._listed_fast:
            listed = self.listed_rows
            points = listed.point_ids({c: inputs[c].to_numpy() for c in listed.names}, n)
            return listed.draw(points, rng)
        codes = np.zeros((n, len(self.design)), dtype=np.int64)
        found = np.zeros(n, dtype=bool)
        if self.enumerable:
            for values, rows in self._groups(inputs):
                valid = self.valid_design_codes(values)
                if len(valid) == 0:
                    continue
                codes[rows] = valid[rng.integers(len(valid), size=len(rows))]
                found[rows] = True
            return codes, found
        # rejection: several candidates per pending row and round, evaluated on plain columns;
        # the first valid candidate of a row is uniform over its valid set
        input_columns = self.columns(inputs)
        pending = np.arange(n)
        for _ in range(max_rounds):
            if len(pending) == 0:
                break
            per_row = int(np.clip(_REJECTION_BATCH // len(pending), 1, _REJECTION_PER_ROW))
            owners = np.repeat(pending, per_row)
            trial = rng.integers(self.design_sizes, size=(len(owners), len(self.design)))
            scope = {name: column[owners] for name, column in input_columns.items()}
            scope.update(self._design_columns(trial))
            ok = np.flatnonzero(self._satisfies(scope, len(owners), self.constraints))
            if len(ok):
                rows, first = np.unique(owners[ok], return_index=True)
                codes[rows] = trial[ok[first]]
                found[rows] = True
                pending = pending[~found[pending]]
        return codes, found

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
        inputs = inputs[self.input_names].reset_index(drop=True).copy()
        codes, found = self.sample_designs(inputs, rng)
        # new inputs only help when the valid design set depends on them
        redraws = max_redraws if self.constrained_inputs else 0
        for _ in range(redraws):
            if found.all():
                break
            missing = np.flatnonzero(~found)
            fresh = self.sample_inputs(len(missing), rng)
            for column, name in enumerate(self.input_names):
                inputs.iloc[missing, column] = fresh[name].to_numpy()
            codes[missing], found[missing] = self.sample_designs(
                inputs.iloc[missing], rng, max_rounds=_REDRAW_ROUNDS
            )
        if not found.all():
            raise SpaceError(
                "no configuration satisfies the constraints: "
                + "; ".join(c.source for c in self.constraints)
            )
        return self.assemble(inputs, codes)

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
        if not self.constraints:
            return
        if self.inputs:
            corners = self._cartesian_grid(2)
            corners = corners[self.satisfies_input_constraints(corners)]
            inputs = pd.concat([corners, self.sample_inputs(trials, rng)], ignore_index=True)
        else:
            inputs = pd.DataFrame(index=range(1))
        _, found = self.sample_designs(inputs, rng, max_rounds=200)
        if not found.any():
            raise SpaceError(
                "no configuration satisfies the constraints: "
                + "; ".join(c.source for c in self.constraints)
            )

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
        codes = np.clip(np.asarray(codes, dtype=np.int64), 0, self.design_sizes - 1)
        out = codes.copy()
        if self.listed_rows is not None and self._listed_fast:
            listed = self.listed_rows
            points = listed.point_ids({c: inputs[c].to_numpy() for c in listed.names}, len(codes))
            return listed.nearest(points, codes)[0]
        if self.enumerable:
            for values, rows in self._groups(inputs):
                valid = self.valid_design_codes(values)
                if len(valid) == 0:
                    continue
                out[rows] = nearest_codes(codes[rows], valid)
            return out
        rng = rng if rng is not None else np.random.default_rng(0)
        scope = {**self.columns(inputs), **self._design_columns(codes)}
        invalid = np.flatnonzero(~self._satisfies(scope, len(codes)))
        for row in invalid:
            out[row] = self._local_repair(inputs.iloc[[row]], codes[row], rng)
        return out

    def _local_repair(
        self, inputs: pd.DataFrame, codes: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """Nearest valid design found among growing random perturbations (large spaces)."""
        input_columns = self.columns(inputs)  # one row: broadcast against the candidates
        for radius in (1, 2, 4, 8, 16, 64, 256):
            offsets = rng.integers(-radius, radius + 1, size=(2048, len(self.design)))
            trial = np.clip(codes + offsets, 0, self.design_sizes - 1)
            ok = self._satisfies({**input_columns, **self._design_columns(trial)}, len(trial))
            if ok.any():
                candidates = trial[ok]
                distance = np.abs(candidates - codes).sum(axis=1)
                return candidates[int(np.argmin(distance))]
        fallback, found = self.sample_designs(inputs, rng)
        if not found[0]:
            raise SpaceError("no valid configuration for input " + str(inputs.iloc[0].to_dict()))
        return fallback[0]

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
        if kind not in NEIGHBOUR_KINDS:
            raise SpaceError(f"unknown neighbour kind '{kind}' (allowed: {NEIGHBOUR_KINDS})")
        here = np.asarray(here, dtype=np.int64).reshape(len(self.design))
        if self.enumerable:
            valid = self.valid_design_codes({n: inputs[n] for n in self.constrained_inputs})
            return select_neighbours(valid.astype(np.int64), here, kind)
        point = pd.DataFrame({n: [inputs[n]] for n in self.input_names}, index=range(1))
        if kind == "adjacent":
            # grow Chebyshev rings until one holds a valid configuration
            for radius in range(1, int(self.design_sizes.max())):
                ring = self._ring(here, radius)
                if ring is None:
                    break
                chosen = ring[self._satisfied(point, ring)]
                if len(chosen):
                    return chosen
            return np.zeros((0, len(self.design)), dtype=np.int64)
        candidates = self._candidate_neighbours(here, kind)
        return candidates[self._satisfied(point, candidates)]

    def _satisfied(self, inputs: pd.DataFrame, codes: np.ndarray) -> np.ndarray:
        """Which designs (codes) satisfy the constraints for one input row."""
        if len(codes) == 0:
            return np.zeros(0, dtype=bool)
        return self._satisfies({**self.columns(inputs), **self._design_columns(codes)}, len(codes))

    def _ring(self, here: np.ndarray, radius: int) -> np.ndarray | None:
        """In-domain codes at Chebyshev distance exactly ``radius`` (None: too many)."""
        low = np.maximum(here - radius, 0)
        high = np.minimum(here + radius, self.design_sizes - 1)
        spans = high - low + 1
        if float(np.prod(spans.astype(float))) > _RING_LIMIT:
            return None
        box = np.indices(tuple(int(s) for s in spans)).reshape(len(spans), -1).T + low
        return box[np.abs(box - here).max(axis=1) == radius]

    def _candidate_neighbours(self, here: np.ndarray, kind: str) -> np.ndarray:
        candidates = []
        if kind == "Hamming":
            for index, size in enumerate(self.design_sizes):
                for code in range(int(size)):
                    if code != here[index]:
                        trial = here.copy()
                        trial[index] = code
                        candidates.append(trial)
        else:
            steps = [(-1, 0, 1)] * len(self.design)
            for offset in itertools.product(*steps):
                if any(offset):
                    trial = here + np.array(offset)
                    if (trial >= 0).all() and (trial < self.design_sizes).all():
                        candidates.append(trial)
        return np.array(candidates, dtype=np.int64).reshape(-1, len(self.design))

    # -------------------------------------------------------------------------------- grids
    def grid(self, sizes: int | Mapping[str, int]) -> pd.DataFrame:
        """Cartesian grid over the inputs: regular, geometric for log parameters, every value
        of categoricals, without the points that constraints on inputs only exclude. ``sizes``
        is one size for all inputs or a size per input name.

        Raises:
            SpaceError: unknown inputs, a grid too large to index (see :meth:`check_grid`), or
                no grid point inside the constrained input domain.
        """
        self.check_grid(sizes)
        table = self._cartesian_grid(sizes)
        if self.input_constraints:
            table = table[self.satisfies_input_constraints(table)].reset_index(drop=True)
            if table.empty:
                raise SpaceError(
                    "no grid point satisfies the constraints on inputs only ("
                    + "; ".join(c.source for c in self.input_constraints)
                    + "): refine the grid"
                )
        return table

    def grid_size(self, sizes: int | Mapping[str, int]) -> int:
        """Points of the Cartesian grid :meth:`grid` starts from (before any constraint)."""
        if isinstance(sizes, Mapping):
            unknown = set(sizes) - set(self.input_names)
            if unknown:
                raise SpaceError(f"grid names unknown inputs {sorted(unknown)}")
        total = 1
        for parameter in self.inputs:
            if parameter.name in self.fixed_inputs:
                continue
            size = sizes.get(parameter.name, 8) if isinstance(sizes, Mapping) else sizes
            total *= len(parameter.grid(int(size)))
        return total

    def check_grid(self, sizes: int | Mapping[str, int]) -> None:
        """Refuse a grid whose points x design configurations exceed :data:`MAX_GRID_KEYS`
        (the optimizer keys every (point, configuration) pair with one int64)."""
        points = self.grid_size(sizes)
        if points * self.design_product > MAX_GRID_KEYS:
            raise SpaceError(
                f"a grid of {points:,} points x {self.design_product:,} design configurations "
                f"is more than 2**62 (point, configuration) pairs; use a coarser grid or fewer "
                "design values"
            )

    def _cartesian_grid(self, sizes: int | Mapping[str, int]) -> pd.DataFrame:
        if isinstance(sizes, Mapping):
            unknown = set(sizes) - set(self.input_names)
            if unknown:
                raise SpaceError(f"grid names unknown inputs {sorted(unknown)}")
        axes = []
        for parameter in self.inputs:
            if parameter.name in self.fixed_inputs:
                axes.append(np.array([self.fixed_inputs[parameter.name]], dtype=parameter.dtype))
                continue
            size = sizes.get(parameter.name, 8) if isinstance(sizes, Mapping) else sizes
            axes.append(parameter.grid(int(size)))
        if not axes:
            return pd.DataFrame(index=range(1))
        mesh = np.meshgrid(*[np.arange(len(a)) for a in axes], indexing="ij")
        return pd.DataFrame(
            {p.name: axes[i][mesh[i].ravel()] for i, p in enumerate(self.inputs)}
        ).astype({p.name: p.dtype for p in self.inputs})


def radix(sizes: np.ndarray) -> np.ndarray:
    """Row-major place values of a mixed-radix number with digit ranges ``sizes``: the flat
    index of design codes ``c`` in the design product is ``c @ radix(design_sizes)``."""
    sizes = np.asarray(sizes, dtype=np.int64)
    out = np.ones(len(sizes), dtype=np.int64)
    for index in range(len(sizes) - 2, -1, -1):
        out[index] = out[index + 1] * sizes[index + 1]
    return out


def select_neighbours(valid: np.ndarray, here: np.ndarray, kind: str) -> np.ndarray:
    """The neighbours of ``here`` among the valid codes ``valid`` (see ``Space.neighbours``;
    ``here`` need not be valid itself)."""
    delta = np.abs(valid - here)
    if kind == "Hamming":
        return valid[(delta > 0).sum(axis=1) == 1]
    chebyshev = delta.max(axis=1) if len(delta) else np.zeros(0, dtype=np.int64)
    if kind == "strictly_adjacent":
        return valid[chebyshev == 1]
    ring = chebyshev[chebyshev > 0]
    return valid[chebyshev == ring.min()] if len(ring) else valid[:0]


def nearest_codes(codes: np.ndarray, valid: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
    """For each row of ``codes``, the row of ``valid`` with the least L1 distance."""
    valid64 = valid.astype(np.int64)
    out = np.empty_like(codes)
    rows_per_chunk = max(1, chunk // max(1, len(valid)))
    for start in range(0, len(codes), rows_per_chunk):
        block = codes[start : start + rows_per_chunk]
        distance = np.abs(block[:, None, :] - valid64[None, :, :]).sum(axis=2)
        out[start : start + rows_per_chunk] = valid64[np.argmin(distance, axis=1)]
    return out


_NONE = np.zeros(0, dtype=np.int64)


def _allowed_key(value: Any) -> str | None:
    """Key of an input value in the allowed designs (text: "130", 130 and 130.0 are one)."""
    if value is None:
        return None
    value = _scalar(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _repeat(row: pd.DataFrame, n: int) -> pd.DataFrame:
    """A one-row table repeated ``n`` times (``n`` may be 0; the table may have no columns)."""
    return row.iloc[np.zeros(n, dtype=np.int64)].reset_index(drop=True)


def _scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value
