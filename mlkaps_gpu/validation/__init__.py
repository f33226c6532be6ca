"""Measured validation of a campaign's header against a reference (an expert's configurations),
merge with the no-regression rule, and the HTML report of a campaign.

    validation = validate(campaign, resolve_reference("expert", campaign), sizes={"n": 16})
    result = merge(campaign, resolve_reference("expert", campaign), sizes={"n": 16})
"""

from mlkaps_gpu.validation._expert import (
    CallableReference,
    FixedConfiguration,
    HeaderReference,
    Reference,
    TableReference,
    campaign_header,
    expert_reference,
    resolve_reference,
)
from mlkaps_gpu.validation._headroom import (
    DEFAULT_HEADROOM_NEIGHBOURS,
    DEFAULT_HEADROOM_POINTS,
    HeadroomSettings,
    measure_headroom,
)
from mlkaps_gpu.validation._merge import (
    MERGE_DIR,
    MergeResult,
    decide,
    describe_merge,
    merge,
    ships,
    write_merge,
)
from mlkaps_gpu.validation._paired_statistics import DEFAULT_ALPHA
from mlkaps_gpu.validation._report import DEFAULT_FOLDS, build_report, write_report
from mlkaps_gpu.validation._validate import (
    DEFAULT_REPEATS,
    Validation,
    reassess,
    validate,
    write_validation,
)
from mlkaps_gpu.validation._validation_grid import parse_grid, validation_grid

__all__ = [
    "DEFAULT_HEADROOM_NEIGHBOURS",
    "DEFAULT_HEADROOM_POINTS",
    "DEFAULT_ALPHA",
    "DEFAULT_FOLDS",
    "DEFAULT_REPEATS",
    "MERGE_DIR",
    "CallableReference",
    "FixedConfiguration",
    "HeaderReference",
    "HeadroomSettings",
    "MergeResult",
    "Reference",
    "TableReference",
    "Validation",
    "build_report",
    "campaign_header",
    "decide",
    "describe_merge",
    "expert_reference",
    "measure_headroom",
    "merge",
    "ships",
    "parse_grid",
    "reassess",
    "resolve_reference",
    "validate",
    "validation_grid",
    "write_merge",
    "write_report",
    "write_validation",
]
