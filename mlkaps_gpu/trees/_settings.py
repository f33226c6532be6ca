"""The ``[trees]`` section: the selector's trees and the header they are written to."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from mlkaps_gpu.space import SettingError, SettingsModel, check_identifier

#: Deepest tree accepted.
MAX_TREE_DEPTH = 32
#: Most inputs the header is verified on.
MAX_VERIFY_INPUTS = 10_000_000


class TreesSettings(SettingsModel):
    """``[trees]``: ``max_depth`` is a depth, or ``"auto"``: the smallest depth whose mean
    predicted regret is within ``depth_tolerance`` (absolute, 0.01 = one percentage point) of the
    best depth's."""

    mode: Literal["joint", "per_parameter"] = Field(
        default="joint",
        description=(
            "`joint`: one tree whose leaves hold complete configurations; `per_parameter`: "
            "one tree per design parameter."
        ),
    )
    max_depth: int | Literal["auto"] = Field(
        default="auto",
        description=(
            "Tree depth, or `auto`: the smallest depth whose mean predicted regret is within "
            "`depth_tolerance` of the best depth's."
        ),
        json_schema_extra={"allowed": f'an integer from 1 to {MAX_TREE_DEPTH}, or "auto"'},
    )
    depth_tolerance: float = Field(
        default=0.01,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            'With `max_depth = "auto"` only: tolerance on the mean relative regret (absolute, '
            "0.01 = one percentage point)."
        ),
    )
    max_configs: Annotated[int, Field(ge=1)] | Literal["auto", "none"] | None = Field(
        default="auto",
        description=(
            "Most distinct configurations the header may return (a library that compiles "
            "every configuration it can return: Triton kernels, C++ template instances), "
            "chosen greedily to lose the least geometric-mean estimate over the grid; `auto` "
            "(the default, decision 0042): as many as the evidence tells apart (the portfolio "
            "size whose choices hold best from one bootstrap replicate of the samples to "
            "another, each replicate holding the measured cells at their measured value "
            "within its standard error: the trees then do not split on differences within "
            "the noise; grown while a dropped configuration, measured beside its "
            "replacement at two points or more, loses more there than the rule tolerates, "
            "decision 0049, or was measured there and its replacement never was, at points "
            "where the confirmation's budget ended, decision 0051; every one where the "
            "inputs are all categorical); `none`: every "
            "decided configuration."
        ),
        json_schema_extra={"allowed": 'a positive integer, "auto" or "none"'},
    )
    prefix: str = Field(
        default="mlkaps",
        description=(
            "Prefix of every symbol of the generated header (`<prefix>_select` ...) and its "
            "file name: an ASCII identifier, not a C/C++ keyword, `<math.h>` name, standard "
            "macro or `main`, not starting with `_`."
        ),
        json_schema_extra={"allowed": "an ASCII C identifier that is not reserved"},
    )
    verify_inputs: int = Field(
        default=10_000,
        ge=1,
        le=MAX_VERIFY_INPUTS,
        description="Inputs the compiled header is compared with the trees on.",
    )

    @field_validator("max_depth")
    @classmethod
    def _depth_range(cls, value: int | str) -> int | str:
        if isinstance(value, int) and not 1 <= value <= MAX_TREE_DEPTH:
            raise SettingError(
                "max_depth", f'must be an integer from 1 to {MAX_TREE_DEPTH}, or "auto"', value
            )
        return value

    @field_validator("prefix")
    @classmethod
    def _c_prefix(cls, value: str) -> str:
        try:
            return check_identifier(value, what="header prefix")
        except ValueError as error:
            raise SettingError("prefix", str(error), value) from None

    @model_validator(mode="after")
    def _tolerance_needs_auto(self) -> TreesSettings:
        if self.given("depth_tolerance") and self.max_depth != "auto":
            raise SettingError(
                "depth_tolerance",
                f'applies only to max_depth = "auto" (max_depth is {self.max_depth}); remove it',
                self.depth_tolerance,
            )
        return self


__all__ = ["MAX_TREE_DEPTH", "MAX_VERIFY_INPUTS", "TreesSettings"]
