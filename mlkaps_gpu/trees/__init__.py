"""Decision-tree selectors and their header-only C / C++ / CUDA code generation.

A selector learns, from the optimal configuration found at each input point, a map from input
values to a configuration; ``to_c`` writes it as a header that compiles with gcc, g++ and nvcc and
answers exactly as ``select`` does (checked by :func:`verify_header`). Two modes:
:class:`JointSelector` (one tree, a complete valid configuration per leaf) and
:class:`PerParameterSelector` (one tree per design parameter). Given the space, a header also
checks the constraints at run time and falls back to the nearest valid configuration.
:func:`fit_selector` fits either mode at a given depth or at the depth a sweep chooses.
"""

from mlkaps_gpu.trees._codegen import render_header
from mlkaps_gpu.trees._compile import CompileError, compile_check, example_call
from mlkaps_gpu.trees._depth import (
    DEFAULT_DEPTHS,
    DEFAULT_TOLERANCE,
    MODES,
    DepthSweep,
    FittedSelector,
    fit_selector,
    make_selector,
    sweep_depths,
    tree_size,
)
from mlkaps_gpu.trees._diagnostics import ViolationReport, constraint_violations, predicted_regret
from mlkaps_gpu.trees._joint import JointSelector
from mlkaps_gpu.trees._model import DecisionModel, LeafOutput, TreeStructure
from mlkaps_gpu.trees._multi import (
    MultiTargetError,
    Target,
    render_multi_header,
    target_macro,
)
from mlkaps_gpu.trees._names import NamePlan, validate_prefix
from mlkaps_gpu.trees._regret import RegretOracle, RegretSummary, Score, relative_regret
from mlkaps_gpu.trees._selector import PerParameterSelector, Selector, tool_versions
from mlkaps_gpu.trees._validity import Validity
from mlkaps_gpu.trees._verify import (
    VerificationReport,
    batch_source,
    boundary_inputs,
    decode_outputs,
    input_arrays,
    verify_header,
)

__all__ = [
    "DEFAULT_DEPTHS",
    "DEFAULT_TOLERANCE",
    "MODES",
    "CompileError",
    "DecisionModel",
    "DepthSweep",
    "FittedSelector",
    "JointSelector",
    "LeafOutput",
    "MultiTargetError",
    "NamePlan",
    "PerParameterSelector",
    "RegretOracle",
    "RegretSummary",
    "Score",
    "Selector",
    "Target",
    "TreeStructure",
    "Validity",
    "VerificationReport",
    "ViolationReport",
    "batch_source",
    "boundary_inputs",
    "compile_check",
    "constraint_violations",
    "decode_outputs",
    "example_call",
    "fit_selector",
    "input_arrays",
    "make_selector",
    "predicted_regret",
    "relative_regret",
    "render_header",
    "render_multi_header",
    "sweep_depths",
    "target_macro",
    "tool_versions",
    "tree_size",
    "validate_prefix",
    "verify_header",
]
