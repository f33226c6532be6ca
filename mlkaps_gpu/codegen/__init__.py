"""C / C++ / CUDA headers from fitted selectors: single and multi-target, checked identifiers and
literals, compile-and-compare verification, and the compiled header called through cffi.

``render_header(selector, prefix)`` writes a fitted :class:`~mlkaps_gpu.trees.Selector` as a
header-only file that compiles with gcc, g++ and nvcc and answers exactly as ``select`` does
(checked by :func:`verify_header`); :func:`render_multi_header` joins several targets' selectors
(architectures) into one header.
"""

from mlkaps_gpu.codegen._codegen import render_header, render_model_header
from mlkaps_gpu.codegen._compile import CompileError, compile_check, example_call
from mlkaps_gpu.codegen._compiled import CompiledHeader
from mlkaps_gpu.codegen._constraint_c import constraint_c_check, constraint_c_value
from mlkaps_gpu.codegen._multi import (
    MultiTargetError,
    Target,
    render_multi_header,
    target_macro,
)
from mlkaps_gpu.codegen._names import NamePlan, validate_prefix
from mlkaps_gpu.codegen._verify import (
    VerificationReport,
    batch_source,
    boundary_inputs,
    decode_outputs,
    input_arrays,
    verify_header,
)

__all__ = [
    "CompileError",
    "CompiledHeader",
    "MultiTargetError",
    "NamePlan",
    "Target",
    "VerificationReport",
    "batch_source",
    "boundary_inputs",
    "compile_check",
    "constraint_c_check",
    "constraint_c_value",
    "decode_outputs",
    "example_call",
    "input_arrays",
    "render_header",
    "render_model_header",
    "render_multi_header",
    "target_macro",
    "validate_prefix",
    "verify_header",
]
