"""Decision-tree selectors: from the best configuration found at each input point, a map from
input values to a configuration.

Two modes: :class:`JointSelector` (one tree, a complete valid configuration per leaf) and
:class:`PerParameterSelector` (one tree per design parameter). Given the space, a selector also
checks the constraints and falls back to the nearest valid configuration.
:func:`fit_selector` fits either mode at a given depth or at the depth a sweep chooses. Trees know
nothing of C: :func:`mlkaps_gpu.codegen.render_header` writes a fitted selector as a header.
"""

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
from mlkaps_gpu.trees._diagnostics import (
    ViolationReport,
    constraint_violations,
    model_of,
    predicted_regret,
)
from mlkaps_gpu.trees._joint import JointSelector
from mlkaps_gpu.trees._model import (
    FLOAT32_MAX,
    DecisionModel,
    LeafOutput,
    Ranking,
    TreeStructure,
)
from mlkaps_gpu.trees._regret import RegretOracle, RegretSummary, Score, relative_regret
from mlkaps_gpu.trees._selector import PerParameterSelector, Selector, tool_versions
from mlkaps_gpu.trees._settings import MAX_TREE_DEPTH, TreesSettings
from mlkaps_gpu.trees._validity import Validity, clamp_bounds

__all__ = [
    "MAX_TREE_DEPTH",
    "TreesSettings",
    "clamp_bounds",
    "DEFAULT_DEPTHS",
    "DEFAULT_TOLERANCE",
    "FLOAT32_MAX",
    "MODES",
    "DecisionModel",
    "DepthSweep",
    "FittedSelector",
    "JointSelector",
    "LeafOutput",
    "PerParameterSelector",
    "Ranking",
    "RegretOracle",
    "RegretSummary",
    "Score",
    "Selector",
    "TreeStructure",
    "Validity",
    "ViolationReport",
    "constraint_violations",
    "fit_selector",
    "make_selector",
    "model_of",
    "predicted_regret",
    "relative_regret",
    "sweep_depths",
    "tool_versions",
    "tree_size",
]
