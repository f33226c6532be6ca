"""Check a generated header against ``select``: compile it into a cffi module and compare.

:func:`verify_header` builds a cffi API-mode extension whose one function loops over input
arrays and calls ``<prefix>_select`` per row, runs it on a table and compares every output with
the selector's Python answer, exactly. :func:`boundary_inputs` makes tables that hit every
threshold, its float32 and integer neighbours and values past float32's exact integer range.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu import user_cache
from mlkaps_gpu.codegen._names import NamePlan
from mlkaps_gpu.space import Parameter
from mlkaps_gpu.trees import FLOAT32_MAX, DecisionModel, Selector, model_of

C_ARRAY_TYPES = {"int": "long long", "float": "double", "bool": "int", "categorical": "int"}
NUMPY_TYPES = {"int": np.int64, "float": np.float64, "bool": np.intc, "categorical": np.intc}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class VerificationReport:
    """Outcome of comparing a compiled header with ``select``.

    Attributes:
        n_rows: rows compared.
        mismatches: per design parameter, the number of rows where C and Python differ.
        first_mismatches: up to ``max_reported`` differing rows (inputs, parameter, both values).
    """

    n_rows: int
    mismatches: dict[str, int]
    first_mismatches: tuple[dict[str, Any], ...] = field(default=())

    @property
    def n_mismatches(self) -> int:
        """Differences between the header and ``select``: rows times design parameters."""
        return sum(self.mismatches.values())

    @property
    def ok(self) -> bool:
        """Whether the header gave ``select``'s answer at every row compared."""
        return self.n_mismatches == 0

    def __str__(self) -> str:
        if self.ok:
            return f"header agrees with select on all {self.n_rows} rows"
        return (
            f"header differs from select on {self.n_mismatches} outputs of {self.n_rows} rows "
            f"({self.mismatches}); first: {list(self.first_mismatches)}"
        )


def batch_inputs(model: DecisionModel, plan: NamePlan) -> tuple[list[str], list[str]]:
    """A batch function's leading parameters (the row count, one input array per input) and
    the arguments of its per-row call (row ``i``, cast to the enum of categorical inputs)."""
    arguments = ["long long n_rows"]
    call_arguments = []
    for index, (parameter, names) in enumerate(zip(model.inputs, plan.inputs, strict=True)):
        arguments.append(f"const {C_ARRAY_TYPES[parameter.kind]} *in_{index}")
        cast = f"({names.enum_type})" if names.enum_type is not None else ""
        call_arguments.append(f"{cast}in_{index}[i]")
    return arguments, call_arguments


def batch_buffers(
    ffi: Any, model: DecisionModel, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]
) -> tuple[list[Any], list[Any]]:
    """cffi buffers over a batch function's input arrays and its (writable) output arrays."""
    in_buffers = [
        ffi.from_buffer(f"{C_ARRAY_TYPES[p.kind]}[]", np.ascontiguousarray(array))
        for p, array in zip(model.inputs, inputs, strict=True)
    ]
    out_buffers = [
        ffi.from_buffer(f"{C_ARRAY_TYPES[p.kind]}[]", array, require_writable=True)
        for p, array in zip(model.design, outputs, strict=True)
    ]
    return in_buffers, out_buffers


def batch_source(
    model: DecisionModel, prefix: str, name: str, *, qualifier: str = ""
) -> tuple[str, str]:
    """C declaration and definition of a function that calls ``<prefix>_select`` on every row.

    Its arguments are ``long long n_rows``, one input array per input parameter (``long long``
    for int, ``double`` for float, ``int`` codes for categorical and bool), then one output
    array per design parameter (``long long``, ``double``, ``int`` 0/1, ``int`` enum value).
    ``qualifier`` goes before the return type (``"__global__"`` makes it a one-thread kernel).
    """
    plan = NamePlan.build(prefix, model.inputs, model.design, model.tree_names)
    arguments, call_arguments = batch_inputs(model, plan)
    assignments = []
    for index, (parameter, output) in enumerate(zip(model.design, plan.outputs, strict=True)):
        c_type = C_ARRAY_TYPES[parameter.kind]
        arguments.append(f"{c_type} *out_{index}")
        assignments.append(f"        out_{index}[i] = ({c_type})c.{output.field};")
    signature = f"void {name}({', '.join(arguments)})"
    definition = "\n".join(
        [
            f"{qualifier} {signature}".strip(),
            "{",
            "    long long i;",
            "    for (i = 0; i < n_rows; ++i) {",
            f"        {plan.config_type} c = {plan.select_function}({', '.join(call_arguments)});",
            *assignments,
            "    }",
            "}",
        ]
    )
    return signature + ";", definition


def ranked_batch_source(model: DecisionModel, prefix: str, name: str) -> tuple[str, str]:
    """C declaration and definition of a function that calls ``<prefix>_ranked`` on every row
    with room for the whole ranking (portfolio + 1 configurations).

    Its arguments are those of :func:`batch_source`, with an ``int`` count array after the
    inputs; each output array holds ``n_rows x (portfolio + 1)`` values, row-major, those past
    a row's count left as they were.
    """
    assert model.ranking is not None
    plan = NamePlan.build(prefix, model.inputs, model.design, model.tree_names)
    width = len(model.ranking.portfolio) + 1
    arguments, call_arguments = batch_inputs(model, plan)
    arguments.append("int *counts")
    assignments = []
    for index, (parameter, output) in enumerate(zip(model.design, plan.outputs, strict=True)):
        c_type = C_ARRAY_TYPES[parameter.kind]
        arguments.append(f"{c_type} *out_{index}")
        assignments.append(
            f"            out_{index}[i * {width} + j] = ({c_type})c[j].{output.field};"
        )
    signature = f"void {name}({', '.join(arguments)})"
    definition = "\n".join(
        [
            signature,
            "{",
            "    long long i;",
            "    int j, n;",
            f"    {plan.config_type} c[{width}];",
            "    for (i = 0; i < n_rows; ++i) {",
            f"        n = {plan.ranked_function}({', '.join(call_arguments)}, c, {width});",
            "        counts[i] = n;",
            "        for (j = 0; j < n; ++j) {",
            *assignments,
            "        }",
            "    }",
            "}",
        ]
    )
    return signature + ";", definition


def run_ranked(
    module: Any, function: str, model: DecisionModel, inputs_table: pd.DataFrame
) -> tuple[list[pd.DataFrame], np.ndarray]:
    """A compiled :func:`ranked_batch_source` function on a table: per rank, the
    configurations (one column per design parameter; a row past its count holds the domain's
    first value), and the count of every row."""
    assert model.ranking is not None
    width = len(model.ranking.portfolio) + 1
    n_rows = len(inputs_table)
    ffi = module.ffi
    counts = np.zeros(n_rows, dtype=np.intc)
    outputs = [np.zeros(n_rows * width, dtype=NUMPY_TYPES[p.kind]) for p in model.design]
    buffers, out_buffers = batch_buffers(ffi, model, input_arrays(model, inputs_table), outputs)
    count_buffer = ffi.from_buffer("int[]", counts, require_writable=True)
    getattr(module.lib, function)(n_rows, *buffers, count_buffer, *out_buffers)
    frames = []
    for rank in range(width):
        arrays = [array.reshape(n_rows, width)[:, rank] for array in outputs]
        frames.append(pd.DataFrame(decode_outputs(model, arrays)))
    return frames, counts.astype(np.int64)


def input_arrays(model: DecisionModel, table: pd.DataFrame) -> list[np.ndarray]:
    """The input columns as the arrays :func:`batch_source` functions read."""
    model.features(table)  # validates columns and categorical values
    return [_input_array(p, table[p.name]) for p in model.inputs]


def decode_outputs(model: DecisionModel, arrays: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Output arrays of a :func:`batch_source` function as Python values (None: invalid enum)."""
    decoded = {}
    for parameter, produced in zip(model.design, arrays, strict=True):
        if parameter.kind == "categorical":
            valid = (produced >= 0) & (produced < parameter.n_values)
            values = parameter.domain_values()[np.where(valid, produced, 0)].astype(object)
            values[~valid] = None
        elif parameter.kind == "bool":
            values = produced != 0
        else:
            values = np.asarray(produced)
        decoded[parameter.name] = values
    return decoded


def _input_array(parameter: Parameter, column: pd.Series) -> np.ndarray:
    if parameter.kind == "categorical":
        return parameter.codes(column).astype(np.intc)
    if parameter.kind == "bool":
        return (parameter.numeric(column) != 0).astype(np.intc)
    if parameter.kind == "int":
        values = np.asarray(column)
        if values.dtype.kind not in "iu":
            as_float = values.astype(np.float64)
            if not np.all(as_float == np.round(as_float)):
                raise ValueError(f"int input '{parameter.name}' holds non-integer values")
        return values.astype(np.int64)
    return np.asarray(column, dtype=np.float64)


def _load_module(ffi: Any, module_name: str, build_dir: Path) -> Any:
    """Compile ``ffi`` in ``build_dir`` (a fresh temporary folder of the caller) and import
    the module just built there."""
    import importlib.util

    library_path = ffi.compile(tmpdir=str(build_dir), verbose=False)
    spec = importlib.util.spec_from_file_location(module_name, library_path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot import the compiled module {library_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_cached_module(module_name: str, declaration: str, source: str) -> Any:
    """The cffi module of ``source`` (C generated by this package) with the functions of
    ``declaration``, built into the user's cache (:mod:`mlkaps_gpu.user_cache`) and checked
    there before it is loaded; ``module_name`` must hold the digest of both texts. A module is
    never built in, nor loaded from, a campaign directory."""
    import cffi  # only needed here: importing the package must not need a compiler toolchain

    def build(folder: Path) -> Path:
        ffi = cffi.FFI()
        ffi.cdef(declaration)
        ffi.set_source(module_name, source)
        return Path(ffi.compile(tmpdir=str(folder), verbose=False))

    return user_cache.load_module("header", module_name, build)


def _compile_batch(
    model: DecisionModel, header: str, plan: NamePlan, workdir: str | Path | None
) -> tuple[Any, str]:
    """The header and a :func:`batch_source` function, compiled and imported with cffi;
    returns the module and the batch function's name (one the header does not define)."""
    taken = set(plan.all_file_scope())
    wrapper = f"{plan.prefix}_verify_batch"
    while wrapper in taken:
        wrapper += "_"
    declaration, definition = batch_source(model, plan.prefix, wrapper)
    if model.ranking is not None:
        ranked_declaration, ranked_definition = ranked_batch_source(
            model, plan.prefix, wrapper + "_ranked"
        )
        declaration += "\n" + ranked_declaration
        definition += "\n\n" + ranked_definition
    source = header + "\n" + definition + "\n"
    digest = user_cache.source_digest(declaration, source)[:24]
    module = load_cached_module(f"_mlkaps_verify_{digest}", declaration, source)
    return module, wrapper


def _run_batch(
    module: Any, wrapper: str, model: DecisionModel, inputs: Sequence[np.ndarray], n_rows: int
) -> list[np.ndarray]:
    """The compiled batch function's output arrays (one per design parameter) on ``inputs``."""
    outputs = [np.zeros(n_rows, dtype=NUMPY_TYPES[p.kind]) for p in model.design]
    buffers, out_buffers = batch_buffers(module.ffi, model, inputs, outputs)
    getattr(module.lib, wrapper)(n_rows, *buffers, *out_buffers)
    return outputs


def _compare(
    model: DecisionModel,
    expected: pd.DataFrame,
    produced: dict[str, np.ndarray],
    inputs_table: pd.DataFrame,
    max_reported: int,
) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Per design parameter, the number of rows where the header's value differs from
    ``select``'s, and up to ``max_reported`` of those rows described."""
    mismatches: dict[str, int] = {}
    reported: list[dict[str, Any]] = []
    for parameter in model.design:
        got_values = produced[parameter.name]
        want = np.asarray(expected[parameter.name])
        differs = np.flatnonzero(~(got_values == want))
        mismatches[parameter.name] = len(differs)
        for row in differs[: max(0, max_reported - len(reported))]:
            reported.append(
                {
                    "row": int(row),
                    "inputs": {p.name: inputs_table[p.name].iloc[row] for p in model.inputs},
                    "parameter": parameter.name,
                    "select": want[row],
                    "header": got_values[row],
                }
            )
    return mismatches, reported


def verify_header(
    selector: Selector | DecisionModel,
    header: str,
    inputs_table: pd.DataFrame,
    *,
    prefix: str,
    workdir: str | Path | None = None,
    max_reported: int = 10,
) -> VerificationReport:
    """Compile ``header`` with cffi, run it on every row and compare with ``select``.

    Args:
        selector: a fitted selector (or its decision model) the header was generated from.
        header: the header text (``render_header(selector, prefix)``).
        inputs_table: one column per input parameter.
        prefix: the prefix the header was generated with.
        workdir: unused (kept for callers): the module is built in the user's cache
            (:mod:`mlkaps_gpu.user_cache`), never beside a campaign.
        max_reported: how many mismatching rows to describe.
    """
    model = model_of(selector)
    plan = NamePlan.build(prefix, model.inputs, model.design, model.tree_names)
    if f" {plan.select_function}(" not in header:
        raise ValueError(f"header has no function {plan.select_function}(): wrong prefix?")
    expected = (
        model.predict(inputs_table)
        if isinstance(selector, DecisionModel)
        else selector.select(inputs_table)
    )
    inputs = input_arrays(model, inputs_table)
    module, wrapper = _compile_batch(model, header, plan, workdir)
    n_rows = len(inputs_table)
    outputs = _run_batch(module, wrapper, model, inputs, n_rows)
    mismatches, reported = _compare(
        model, expected, decode_outputs(model, outputs), inputs_table, max_reported
    )
    if model.ranking is not None:
        if f" {plan.ranked_function}(" not in header:
            raise ValueError(f"header has no function {plan.ranked_function}()")
        differs = _compare_ranked(model, module, wrapper + "_ranked", inputs_table)
        mismatches[f"{plan.ranked_function}()"] = len(differs)
        for row in differs[: max(0, max_reported - len(reported))]:
            reported.append(
                {
                    "row": int(row),
                    "inputs": {p.name: inputs_table[p.name].iloc[row] for p in model.inputs},
                    "parameter": f"{plan.ranked_function}()",
                }
            )
    return VerificationReport(
        n_rows=n_rows, mismatches=mismatches, first_mismatches=tuple(reported)
    )


def _compare_ranked(
    model: DecisionModel, module: Any, function: str, inputs_table: pd.DataFrame
) -> np.ndarray:
    """Rows where the header's ranked configurations (count or any of them) differ from
    :meth:`DecisionModel.ranked_codes`."""
    frames, counts = run_ranked(module, function, model, inputs_table)
    codes, expected_counts = model.ranked_codes(inputs_table)
    differs = counts != expected_counts
    for rank, frame in enumerate(frames):
        present = rank < expected_counts
        for column, parameter in enumerate(model.design):
            values = parameter.domain_values()[np.maximum(codes[:, rank, column], 0)]
            got = np.asarray(frame[parameter.name])
            differs |= present & ~(got == values)
    return np.flatnonzero(differs)


# --------------------------------------------------------------------------- boundary inputs
def _float32_neighbourhood(threshold: float) -> list[float]:
    """float32 values around ``threshold`` (two steps each way) and the rounding midpoints
    between them (where a double's float32 rounding flips), with their double neighbours."""
    nearest = np.float32(threshold)
    points = [nearest]
    for direction in (-np.inf, np.inf):
        step = nearest
        for _ in range(2):
            step = np.nextafter(step, np.float32(direction))
            points.append(step)
    as_double = sorted(float(p) for p in points if np.isfinite(p))
    values = [float(threshold), *as_double]
    values += [np.nextafter(threshold, -np.inf), np.nextafter(threshold, np.inf)]
    for low, high in itertools.pairwise(as_double):
        middle = low / 2 + high / 2
        values += [middle, np.nextafter(middle, -np.inf), np.nextafter(middle, np.inf)]
    return [float(v) for v in values]


def _special_values(parameter: Parameter, thresholds: np.ndarray) -> list[Any]:
    """Values of one input worth testing: thresholds and neighbours, domain ends, extremes."""
    if parameter.kind in ("categorical", "bool"):
        return list(parameter.domain_values().tolist())
    near = [v for t in thresholds for v in _float32_neighbourhood(float(t))]
    domain = parameter.domain_values()
    ends = [float(domain[0]), float(domain[-1])]
    if parameter.kind == "float":
        magnitudes = [5e-324, 1e-45, FLOAT32_MAX, 1e39, 1e300, math.inf]
        extremes = [0.0, *magnitudes, *(-v for v in magnitudes)]
        return sorted(set(near + ends + extremes)) + [-0.0, math.nan]
    integers: set[int] = set()
    for value in near + ends:
        integers.update(math.floor(value) + d for d in (-1, 0, 1))
        integers.update(math.ceil(value) + d for d in (-1, 0, 1))
    for base in (2**24, 2**25, 2**31, 2**53, 2**62):
        integers.update(s * (base + d) for s in (1, -1) for d in (-1, 0, 1, 2, 3))
    integers.update({0, 1, _INT64_MAX, _INT64_MIN, _INT64_MAX - 1})
    return sorted(v for v in integers if _INT64_MIN <= v <= _INT64_MAX)


def _column(parameter: Parameter, values: Sequence[Any]) -> pd.Series:
    return pd.Series(list(values), name=parameter.name, dtype=parameter.dtype)


def boundary_inputs(
    selector: Selector | DecisionModel,
    n_random: int,
    rng: np.random.Generator,
    *,
    repeats: int = 3,
) -> pd.DataFrame:
    """Input rows that probe every split of every tree.

    For each input, the special values are every threshold on it, the float32 values around
    each threshold and the midpoints where float32 rounding flips (floored and ceiled to
    integers +-1 for int inputs), the domain ends, integers past 2**24, 2**53 and the int64
    limits, and for float inputs signed zeros, subnormals, float32 overflow, inf and NaN. For
    an input some constraint mentions, the numeric values of the constrained design parameters
    (and their neighbours) count as thresholds too: the run-time check may flip there.
    Each special value appears in ``repeats`` rows whose other inputs are random; then
    ``n_random`` rows mix random domain points with special values.
    """
    model = model_of(selector)
    # values where a constraint on an input may flip: the numeric design values
    flips = np.empty(0)
    if model.validity is not None:
        numeric = [p for p in model.validity.constrained_params if p.kind in ("int", "float")]
        flips = np.concatenate([np.empty(0), *(p.numeric(p.domain_values()) for p in numeric)])
    specials = []
    for index, parameter in enumerate(model.inputs):
        thresholds = [
            tree.threshold[(tree.children_left != -1) & (tree.feature == index)]
            for tree in model.trees
        ]
        if model.validity is not None and index in model.validity.constrained_inputs:
            thresholds.append(flips)
        unique = np.unique(np.concatenate(thresholds)) if thresholds else np.empty(0)
        specials.append(_special_values(parameter, unique))

    def random_column(parameter: Parameter, special: list[Any], size: int) -> list[Any]:
        values = list(parameter.sample(size, rng, discrete=False).tolist())
        picks = rng.integers(0, len(special), size)
        use_special = rng.random(size) < 0.5
        return [special[p] if s else v for v, p, s in zip(values, picks, use_special, strict=True)]

    columns: list[list[Any]] = [[] for _ in model.inputs]
    for index in range(len(model.inputs)):
        size = len(specials[index]) * repeats
        for other, parameter in enumerate(model.inputs):
            if other == index:
                columns[other] += [v for v in specials[index] for _ in range(repeats)]
            else:
                columns[other] += random_column(parameter, specials[other], size)
    for index, parameter in enumerate(model.inputs):
        values = list(parameter.sample(n_random, rng, discrete=False).tolist())
        mixed = random_column(parameter, specials[index], n_random)
        keep = rng.random(n_random) < 0.5
        columns[index] += [v if k else m for v, m, k in zip(values, mixed, keep, strict=True)]
    return pd.DataFrame(
        {p.name: _column(p, column) for p, column in zip(model.inputs, columns, strict=True)}
    )


# Names used by ``_compiled.py`` (written alongside this module), kept for it.
_NUMPY_TYPES = NUMPY_TYPES


def _wrapper_source(model: DecisionModel, plan: NamePlan, name: str) -> tuple[str, str]:
    """:func:`batch_source` for the prefix of ``plan``."""
    return batch_source(model, plan.prefix, name)
