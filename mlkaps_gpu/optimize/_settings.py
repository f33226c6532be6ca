"""The ``[optimization]`` section: the input grid and the search of the best configuration at
each of its points."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Literal

from pydantic import Field, model_validator

from mlkaps_gpu.space import FiniteFloat, SettingError, SettingsModel

#: Largest grid size of one input.
MAX_GRID_SIZE = 10_000
#: Most grid points (the product of the inputs' grid sizes).
MAX_GRID_POINTS = 1_000_000
#: Largest NSGA-II population and number of generations.
MAX_POPULATION = 100_000
MAX_GENERATIONS = 100_000
#: Grid size of an input a ``grid`` table does not name.
DEFAULT_AXIS_SIZE = 8

GridSize = Annotated[int, Field(ge=1, le=MAX_GRID_SIZE)]


class OptimizationSettings(SettingsModel):
    """``[optimization]``: the grid of inputs and the optimizer run at each point."""

    grid: GridSize | dict[str, GridSize] = Field(
        default=16,
        description=(
            "Grid points per input: one size for every input, or a table `{input = size}` "
            f"(inputs it does not name get {DEFAULT_AXIS_SIZE}); geometric for log inputs, "
            "every value for categoricals. Keys must be inputs; at most "
            f"{MAX_GRID_POINTS} points in all. An integer input that a constraint ties to the "
            "design (`block <= n`) also gets both sides of the values where the valid "
            "configurations change, up to half its size more."
        ),
        json_schema_extra={
            "allowed": f"an integer from 1 to {MAX_GRID_SIZE}, or a table {{input = size}}"
        },
    )
    method: Literal["auto", "nsga2", "exhaustive"] = Field(
        default="auto",
        description=(
            "`exhaustive` evaluates every valid configuration at each point, `nsga2` runs a "
            "batched genetic algorithm, `auto` picks exhaustive when the space is small."
        ),
    )
    population: int = Field(
        default=40, ge=4, le=MAX_POPULATION, description="NSGA-II population per grid point."
    )
    generations: int = Field(
        default=40, ge=1, le=MAX_GENERATIONS, description="NSGA-II generations per grid point."
    )
    weights: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = Field(
        default=None,
        description=(
            "Several objectives only: weights of the normalised objectives that pick one "
            "configuration per point (one per objective, not all zero)."
        ),
        json_schema_extra={"allowed": "a list of finite numbers >= 0, one per objective"},
    )
    bounds: dict[str, FiniteFloat] = Field(
        default_factory=dict,
        description=(
            "Several objectives only: the best primary objective under upper bounds on "
            "secondary objectives, e.g. `{ energy = 10.0 }`."
        ),
        json_schema_extra={"allowed": "a table {secondary objective = finite number}"},
    )
    window: int = Field(
        default=10,
        ge=1,
        le=MAX_GENERATIONS,
        description="Generations without improvement after which a grid point stops.",
    )
    prefer_measured: bool = Field(
        default=True,
        description=(
            "Ship a measured configuration instead of the surrogate's choice where measurements "
            "at the point's exact inputs say better (single objective)."
        ),
    )

    @model_validator(mode="after")
    def _weights_not_all_zero(self) -> OptimizationSettings:
        if self.weights is not None and not any(self.weights):
            raise SettingError("weights", "must not be all zero", self.weights)
        return self

    def check_objectives(self, objectives: Sequence[str]) -> None:
        """Check ``weights`` and ``bounds`` against the campaign's objectives.

        Raises:
            SettingError: naming the key.
        """
        if self.weights is not None and len(self.weights) != len(objectives):
            raise SettingError(
                "weights",
                f"needs one weight per objective ({len(objectives)}: {', '.join(objectives)})",
                self.weights,
            )
        unknown = sorted(set(self.bounds) - set(objectives[1:]))
        if unknown:
            raise SettingError(
                "bounds",
                f"{unknown[0]} is not a secondary objective (secondary objectives: "
                f"{', '.join(objectives[1:]) or 'none'})",
                self.bounds,
            )

    def check_grid(
        self, input_names: Sequence[str], axis_length: Callable[[str, int], int]
    ) -> None:
        """Check the grid against the inputs.

        Args:
            input_names: the inputs, in order.
            axis_length: the number of grid values of an input at a grid size.

        Raises:
            SettingError: a grid key is not an input, or the grid has too many points.
        """
        if isinstance(self.grid, dict):
            for name in self.grid:
                if name not in input_names:
                    known = ", ".join(input_names) or "none"
                    raise SettingError(
                        f"grid.{name}", f"not an input (inputs: {known})", self.grid[name]
                    )
        points = 1
        for name in input_names:
            size = self.size_of(name)
            points *= axis_length(name, size)
        if points > MAX_GRID_POINTS:
            raise SettingError(
                "grid",
                f"{points} grid points: at most {MAX_GRID_POINTS} (lower the sizes)",
                self.grid,
            )

    def size_of(self, name: str) -> int:
        """The grid size of input ``name``."""
        if isinstance(self.grid, dict):
            return self.grid.get(name, DEFAULT_AXIS_SIZE)
        return self.grid


__all__ = [
    "DEFAULT_AXIS_SIZE",
    "MAX_GENERATIONS",
    "MAX_GRID_POINTS",
    "MAX_GRID_SIZE",
    "MAX_POPULATION",
    "OptimizationSettings",
]
