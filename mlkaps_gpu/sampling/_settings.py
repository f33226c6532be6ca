"""The ``[sampling]`` section: which sampler measures what, and how many measurements."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mlkaps_gpu.space import Scalar, SettingError, SettingsModel

#: Most measurements one campaign may ask for.
MAX_BUDGET = 10_000_000
#: Most measurements one batch may hold (one executor call).
MAX_BATCH_SIZE = 100_000
#: Keys read only by GA-Adaptive (``method = "ga_adaptive"``).
GA_ADAPTIVE_KEYS = ("bootstrap", "eps_initial", "eps_final", "sub_sampler")


class SamplingSettings(SettingsModel):
    """``[sampling]``: the sampler and the measurement budget."""

    method: Literal["random", "lhs", "hvs", "hvsr", "bayes", "ga_adaptive"] = Field(
        default="lhs",
        description=(
            "Sampler: `random`, `lhs` (Latin hypercube), `hvs` / `hvsr` (hierarchical variance "
            "sampling), `bayes` (Gaussian-process expected improvement) or `ga_adaptive` "
            "(exploration, then a genetic algorithm on the surrogate)."
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
            "50 or the budget if smaller."
        ),
    )
    bootstrap: float = Field(
        default=0.2,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="GA-Adaptive only: share of the budget spent on the initial exploration.",
    )
    eps_initial: float = Field(
        default=0.3,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="GA-Adaptive only: exploration share of a batch at the start.",
    )
    eps_final: float = Field(
        default=0.8,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="GA-Adaptive only: exploration share of a batch at the end.",
    )
    sub_sampler: Literal["lhs", "random", "hvs", "hvsr", "bayes"] = Field(
        default="lhs", description="GA-Adaptive only: the sampler of its exploration."
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
            self.batch_size = min(50, self.budget)
        return self


__all__ = ["GA_ADAPTIVE_KEYS", "MAX_BATCH_SIZE", "MAX_BUDGET", "SamplingSettings"]
