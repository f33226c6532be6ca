"""The ``[sampling]`` section: which sampler measures what, and how many measurements."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mlkaps_gpu.sampling._registry import SAMPLER_NAMES, SUB_SAMPLERS
from mlkaps_gpu.space import Scalar, SettingError, SettingsModel

#: A registered sampler's name (:data:`~mlkaps_gpu.sampling.SAMPLERS`).
SamplerName = Literal[SAMPLER_NAMES]  # type: ignore[valid-type]
#: A sampler GA-Adaptive can explore with.
SubSamplerName = Literal[SUB_SAMPLERS]  # type: ignore[valid-type]

#: Most measurements one campaign may ask for.
MAX_BUDGET = 10_000_000
#: Most measurements one batch may hold (one executor call).
MAX_BATCH_SIZE = 100_000
#: Keys read only by GA-Adaptive (``method = "ga_adaptive"``).
GA_ADAPTIVE_KEYS = ("bootstrap", "eps_initial", "eps_final", "sub_sampler")
#: Default batch size: this share of the budget (at least 1), so that model-based samplers
#: learn about 20 times whatever the budget.
BATCH_SHARE = 0.05


class SamplingSettings(SettingsModel):
    """``[sampling]``: the sampler and the measurement budget."""

    method: SamplerName = Field(
        default="ga_adaptive",
        description=(
            "Sampler: `random`, `lhs` (Latin hypercube), `hvs` / `hvsr` (hierarchical variance "
            "sampling), `bayes` (Gaussian-process expected improvement) or `ga_adaptive` "
            "(the default: exploration, then the configurations a bootstrapped LightGBM "
            "ensemble ranks best, near the incumbents and across input values)."
        ),
    )
    budget: int = Field(
        default=500,
        ge=1,
        le=MAX_BUDGET,
        description="Measurements of the campaign (rows of the store).",
    )
    batch_size: int = Field(
        default=50,
        ge=1,
        le=MAX_BATCH_SIZE,
        description=(
            "Measurements per executor call (the last batch may be smaller); when not given, "
            "5 % of the budget (at least 1)."
        ),
    )
    bootstrap: float | None = Field(
        default=None,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "GA-Adaptive only: share of the budget spent on the initial exploration (LHS). "
            "Default: 0.2 where the inputs take a few values (GPUs, a list of sizes), 0.05 "
            "where they take many (a size range, a table of shapes), whose exploitation "
            "already spreads its comparisons over random input points."
        ),
    )
    eps_initial: float = Field(
        default=1.0,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description=(
            "GA-Adaptive only: exploitation share of a batch right after the initial "
            "exploration (the rest comes from `sub_sampler`); the ensemble's spread already "
            "explores."
        ),
    )
    eps_final: float = Field(
        default=1.0,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="GA-Adaptive only: exploitation share of a batch at the end of the budget.",
    )
    sub_sampler: SubSamplerName = Field(
        default="lhs", description="GA-Adaptive only: the sampler of its exploration."
    )
    stop_after_failures: int = Field(
        default=20,
        ge=0,
        le=MAX_BUDGET,
        description=(
            "Stop the campaign (exit status 2, the first error shown) when this many first "
            "measurements of a run have all failed; 0 never stops. The failed rows stay stored; "
            "fix the kernel and run the same command to resume."
        ),
    )
    confirm: float = Field(
        default=0.1,
        ge=0,
        le=0.9,
        allow_inf_nan=False,
        description=(
            "Share of the budget kept from sampling to measure the header's answers on the grid "
            "before it is written (an answer that measures worse than the best measured "
            "configuration there is replaced and the trees refitted); with a kernel measured "
            "live, answers that rest on one measurement better than the model predicts are "
            "measured again; what the answers do not need is spent on their most promising "
            "unmeasured neighbours; where the reserve "
            "runs out before an answer was measured, a configuration measured at that point "
            "ships instead (where five were measured there, or, live, an earlier answer: "
            "decision 0053), unless the model predicts the answer "
            "faster by more than its calibrated error. Where a design constraint ties an "
            "integer input to the design (`block <= n`), each configuration is first "
            "measured at one grid point where it becomes valid (`n = block`), up to as many "
            "cells as the reserve, taken from the sampling's share (decision 0052). Single "
            "objective only."
        ),
    )
    fixed: dict[str, Scalar] = Field(
        default_factory=dict,
        description=(
            'Inputs held at one value while sampling, e.g. `{ gpu = "A100" }` (one '
            "architecture); each key must be an input and each value in its domain."
        ),
        json_schema_extra={"allowed": "a table {input = value}"},
    )

    @model_validator(mode="after")
    def _ga_keys_need_ga(self) -> SamplingSettings:
        if self.method != "ga_adaptive":
            for key in GA_ADAPTIVE_KEYS:
                if self.given(key):
                    raise SettingError(
                        key,
                        f'applies only to method = "ga_adaptive" (method is "{self.method}"); '
                        "remove it",
                        getattr(self, key),
                    )
        if not self.given("batch_size"):
            self.batch_size = max(1, round(BATCH_SHARE * self.budget))
        return self


__all__ = ["GA_ADAPTIVE_KEYS", "MAX_BATCH_SIZE", "MAX_BUDGET", "SamplingSettings"]
