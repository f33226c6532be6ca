"""Decision-tree selectors and their header-only C / C++ / CUDA code generation.

A selector learns, from the optimal configuration found at each input point, a map from input
values to a configuration; ``to_c`` writes it as a header that compiles with gcc, g++ and nvcc and
answers exactly as ``select`` does (checked by :func:`verify_header`).
"""

from mlkaps_gpu.trees._codegen import render_header
from mlkaps_gpu.trees._compile import CompileError, compile_check, example_call
from mlkaps_gpu.trees._model import DecisionModel, LeafOutput, TreeStructure
from mlkaps_gpu.trees._names import NamePlan, validate_prefix
from mlkaps_gpu.trees._selector import PerParameterSelector, Selector, tool_versions
from mlkaps_gpu.trees._verify import (
    VerificationReport,
    batch_source,
    boundary_inputs,
    decode_outputs,
    input_arrays,
    verify_header,
)

__all__ = [
    "CompileError",
    "DecisionModel",
    "LeafOutput",
    "NamePlan",
    "PerParameterSelector",
    "Selector",
    "TreeStructure",
    "VerificationReport",
    "batch_source",
    "boundary_inputs",
    "compile_check",
    "decode_outputs",
    "example_call",
    "input_arrays",
    "render_header",
    "tool_versions",
    "validate_prefix",
    "verify_header",
]
