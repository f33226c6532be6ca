"""Constraints compiled to C in one module, to compare the header's semantics with numpy's.

:class:`CompiledConstraints` writes every constraint of a batch with
:func:`~mlkaps_gpu.codegen.constraint_c_value` into one C file (one function per constraint and a
dispatcher), builds it through cffi and evaluates it over the rows of a column table. Used by
the C/numpy property test of the constraint language and by ``experiments/fuzz_config.py``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mlkaps_gpu.codegen import constraint_c_value
from mlkaps_gpu.space import Constraint, Parameter

_CDEF = "void evaluate(int expression, int n_rows, const double *rows, double *out);"


class CompiledConstraints:
    """A batch of constraints compiled into one cffi module.

    Args:
        constraints: parsed constraints over ``parameters``.
        parameters: every parameter the constraints may name, in column order.
        workdir: folder for the build (a temporary one when None).
        flags: compiler flags (``-O0`` compiles a large batch fastest).
    """

    def __init__(
        self,
        constraints: Sequence[Constraint],
        parameters: Sequence[Parameter],
        *,
        workdir: str | Path | None = None,
        flags: Sequence[str] = ("-O0",),
    ) -> None:
        self.constraints = list(constraints)
        self.parameters = list(parameters)
        self.source = self._source()
        digest = hashlib.sha256((self.source + " ".join(flags)).encode()).hexdigest()[:16]
        name = f"_mlkaps_constraints_{digest}"
        folder = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp())
        folder.mkdir(parents=True, exist_ok=True)
        self._module = _build(name, self.source, folder, list(flags))

    def _source(self) -> str:
        column = {p.name: index for index, p in enumerate(self.parameters)}
        parameters = {p.name: p for p in self.parameters}

        def name_of(name: str) -> str:
            return f"row[{column[name]}]"

        def literal_of(name: str, value: str) -> str:
            return str(parameters[name].domain_values().tolist().index(value))

        functions = []
        for index, constraint in enumerate(self.constraints):
            lines, result = constraint_c_value(constraint, name_of, literal_of, avoid=("row",))
            body = "\n".join("    " + line for line in lines)
            functions.append(
                f"static double constraint_{index}(const double *row)\n{{\n{body}\n"
                f"    return {result};\n}}\n"
            )
        table = ", ".join(f"constraint_{i}" for i in range(len(self.constraints))) or "0"
        width = max(1, len(self.parameters))
        return (
            "#include <math.h>\n\n"
            + "\n".join(functions)
            + "\ntypedef double (*constraint_function)(const double *);\n"
            + f"static const constraint_function table[] = {{{table}}};\n\n"
            + "void evaluate(int expression, int n_rows, const double *rows, double *out)\n"
            + "{\n"
            + "    int i;\n"
            + "    for (i = 0; i < n_rows; ++i) {\n"
            + f"        out[i] = table[expression](rows + (long)i * {width});\n"
            + "    }\n"
            + "}\n"
        )

    def rows(self, columns: Mapping[str, Any], n_rows: int) -> np.ndarray:
        """The row-major double matrix the C side reads (categoricals as value codes)."""
        matrix = np.zeros((n_rows, max(1, len(self.parameters))), dtype=np.float64)
        for index, parameter in enumerate(self.parameters):
            if parameter.name not in columns:
                continue
            column = np.broadcast_to(np.asarray(columns[parameter.name]), (n_rows,))
            if parameter.kind == "categorical":
                matrix[:, index] = parameter.codes(column.astype(object))
            else:
                matrix[:, index] = column.astype(np.float64)
        return matrix

    def values(self, index: int, columns: Mapping[str, Any], n_rows: int) -> np.ndarray:
        """Constraint ``index``'s C value per row (NaN: undefined)."""
        ffi, lib = self._module.ffi, self._module.lib
        rows = np.ascontiguousarray(self.rows(columns, n_rows))
        out = np.empty(n_rows, dtype=np.float64)
        lib.evaluate(
            index,
            n_rows,
            ffi.cast("const double *", ffi.from_buffer(rows)),
            ffi.cast("double *", ffi.from_buffer(out)),
        )
        return out


def _build(name: str, source: str, folder: Path, flags: list[str]) -> Any:
    import cffi

    built = list(folder.glob(f"{name}*.so"))
    if not built:
        ffi = cffi.FFI()
        ffi.cdef(_CDEF)
        ffi.set_source(name, source, libraries=["m"], extra_compile_args=flags)
        ffi.compile(tmpdir=str(folder))
        built = list(folder.glob(f"{name}*.so"))
    spec = importlib.util.spec_from_file_location(name, built[0])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules.setdefault(name, module)
    return module


def same_values(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Element-wise: both undefined (NaN), or the same double (sign of zero included)."""
    left, right = np.asarray(left, dtype=np.float64), np.asarray(right, dtype=np.float64)
    both_nan = np.isnan(left) & np.isnan(right)
    equal = (left == right) & (np.signbit(left) == np.signbit(right))
    return both_nan | equal
