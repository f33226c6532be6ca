"""A generated header compiled through cffi and callable from Python, cached on disk.

Used by ``mlkaps-gpu select`` so that answers come from the compiled header itself (what a
library embedding it would get), not from the Python trees. The module is keyed by a hash of the
header and wrapper source, built into the user's cache (:mod:`mlkaps_gpu.user_cache`) and checked
there before it is loaded; a second call finds it there. Nothing is built in or loaded from a
campaign directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu import user_cache
from mlkaps_gpu.codegen._names import NamePlan
from mlkaps_gpu.codegen._verify import (
    _NUMPY_TYPES,
    _input_array,
    _wrapper_source,
    batch_buffers,
    load_cached_module,
    ranked_batch_source,
    run_ranked,
)
from mlkaps_gpu.trees import DecisionModel, Selector, model_of


class CompiledHeader:
    """Call a generated header's ``<prefix>_select`` (and ``<prefix>_ranked``, where it has
    one) on a table of inputs.

    Args:
        selector: the fitted selector (or decision model) the header was generated from; it
            gives the parameter types, not the answers.
        header: the header text.
        prefix: the prefix the header was generated with.
        build_dir: unused (kept for callers): the module is built in, and loaded from, the
            user's cache (:mod:`mlkaps_gpu.user_cache`), keyed by the hash of its source.
    """

    def __init__(
        self,
        selector: Selector | DecisionModel,
        header: str,
        *,
        prefix: str,
        build_dir: Path | None = None,
    ) -> None:
        self.model = model_of(selector)
        plan = NamePlan.build(prefix, self.model.inputs, self.model.design, self.model.tree_names)
        taken = set(plan.all_file_scope())
        self.function = f"{prefix}_python_batch"
        while self.function in taken:
            self.function += "_"
        declaration, definition = _wrapper_source(self.model, plan, self.function)
        #: whether the header defines ``<prefix>_ranked`` (a shim over a multi-target header,
        #: say, may not, whatever the model)
        self.ranks = self.model.ranking is not None and f" {plan.ranked_function}(" in header
        if self.ranks:
            ranked_declaration, ranked_definition = ranked_batch_source(
                self.model, prefix, self.function + "_ranked"
            )
            declaration += "\n" + ranked_declaration
            definition += "\n\n" + ranked_definition
        source = header + "\n" + definition + "\n"
        digest = user_cache.source_digest(declaration, source)[:24]
        self.module: Any = load_cached_module(f"_mlkaps_header_{digest}", declaration, source)

    def __call__(self, inputs_table: pd.DataFrame) -> pd.DataFrame:
        """The header's configuration for every row (one column per design parameter)."""
        model = self.model
        n_rows = len(inputs_table)
        ffi = self.module.ffi
        inputs = [np.ascontiguousarray(_input_array(p, inputs_table[p.name])) for p in model.inputs]
        outputs = [np.zeros(n_rows, dtype=_NUMPY_TYPES[p.kind]) for p in model.design]
        buffers, out_buffers = batch_buffers(ffi, model, inputs, outputs)
        getattr(self.module.lib, self.function)(n_rows, *buffers, *out_buffers)
        columns: dict[str, Any] = {}
        for parameter, produced in zip(model.design, outputs, strict=True):
            if parameter.kind == "categorical":
                columns[parameter.name] = parameter.domain_values()[produced].astype(object)
            elif parameter.kind == "bool":
                columns[parameter.name] = produced != 0
            else:
                columns[parameter.name] = produced
        return pd.DataFrame(columns)

    def ranked(self, inputs_table: pd.DataFrame) -> tuple[list[pd.DataFrame], np.ndarray]:
        """The header's ``<prefix>_ranked`` for every row, with room for its whole ranking:
        per rank, the configurations (one column per design parameter; a row past its count
        holds the domain's first value), and the count of every row.

        Raises:
            ValueError: the header has no ranked function (its model ranks nothing).
        """
        if not self.ranks:
            raise ValueError(
                "this header ranks no configurations (only a joint tree's header does)"
            )
        return run_ranked(self.module, self.function + "_ranked", self.model, inputs_table)
