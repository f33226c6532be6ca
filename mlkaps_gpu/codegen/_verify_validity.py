"""Run a generated header's ``<prefix>_is_valid`` on a table through cffi (for checking it
against ``Space.is_valid``)."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from mlkaps_gpu.codegen._names import NamePlan
from mlkaps_gpu.codegen._verify import C_ARRAY_TYPES, _input_array, _load_module, batch_inputs
from mlkaps_gpu.trees import DecisionModel, Selector, model_of


def _design_array(kind: str, parameter_codes: np.ndarray, column: pd.Series) -> np.ndarray:
    if kind == "categorical":
        return parameter_codes.astype(np.intc)  # -1 outside the domain: an invalid enum value
    if kind == "bool":
        return np.asarray(column, dtype=bool).astype(np.intc)
    if kind == "int":
        return np.asarray(column).astype(np.int64)
    return np.asarray(column, dtype=np.float64)


def validity_batch_source(model: DecisionModel, prefix: str, name: str) -> tuple[str, str]:
    """Declaration and definition of ``void name(n_rows, inputs..., design..., int *out)``
    calling ``<prefix>_is_valid`` per row (arrays typed as in :func:`batch_source`)."""
    plan = NamePlan.build(prefix, model.inputs, model.design, model.tree_names)
    arguments, call = batch_inputs(model, plan)
    fields = []
    for index, (parameter, output) in enumerate(zip(model.design, plan.outputs, strict=True)):
        arguments.append(f"const {C_ARRAY_TYPES[parameter.kind]} *design_{index}")
        cast = f"({output.enum_type})" if output.enum_type is not None else ""
        fields.append(f"        c.{output.field} = {cast}design_{index}[i];")
    arguments.append("int *out")
    signature = f"void {name}({', '.join(arguments)})"
    definition = "\n".join(
        [
            signature,
            "{",
            "    long long i;",
            "    for (i = 0; i < n_rows; ++i) {",
            f"        {plan.config_type} c;",
            *fields,
            f"        out[i] = {plan.validity.is_valid}({', '.join([*call, '&c'])});",
            "    }",
            "}",
        ]
    )
    return signature + ";", definition


def verify_is_valid(
    selector: Selector | DecisionModel,
    header: str,
    table: pd.DataFrame,
    *,
    prefix: str,
    workdir: str | Path | None = None,
) -> np.ndarray:
    """The header's ``is_valid`` on every row of ``table`` (inputs and design columns).

    Input values must be representable by the C argument types (categorical inputs in their
    domain); design values may lie outside their domains."""
    model = model_of(selector)
    if model.validity is None:
        raise ValueError("this model has no validity: fit the selector with space=")
    taken = set(
        NamePlan.build(prefix, model.inputs, model.design, model.tree_names).all_file_scope()
    )
    name = f"{prefix}_verify_is_valid"
    while name in taken:
        name += "_"
    declaration, definition = validity_batch_source(model, prefix, name)
    source = header + "\n" + definition + "\n"
    module_name = "_mlkaps_valid_" + hashlib.sha256(source.encode()).hexdigest()[:16]
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(declaration)
    ffi.set_source(module_name, source)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        module = _load_module(ffi, module_name, Path(tmp))
    arrays = [np.ascontiguousarray(_input_array(p, table[p.name])) for p in model.inputs]
    arrays += [
        np.ascontiguousarray(_design_array(p.kind, p.codes(table[p.name]), table[p.name]))
        for p in model.design
    ]
    kinds = [p.kind for p in (*model.inputs, *model.design)]
    buffers = [
        module.ffi.from_buffer(f"{C_ARRAY_TYPES[kind]}[]", array)
        for kind, array in zip(kinds, arrays, strict=True)
    ]
    out = np.zeros(len(table), dtype=np.intc)
    getattr(module.lib, name)(
        len(table), *buffers, module.ffi.from_buffer("int[]", out, require_writable=True)
    )
    return out != 0
