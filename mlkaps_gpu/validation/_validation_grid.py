"""The validation grid: where ``validate`` compares the header's choices with a reference.

**Grid.** The validation grid places, along every range input, the centres of ``size`` equal
cells (geometric cells for log-scaled inputs): ``low * (high / low) ** ((i + 0.5) / size)``. The
optimization grid holds the cell *edges* (``geomspace(low, high, size)``), so the two never share
an interior point at the same size; at other sizes they can meet only where integer rounding
merges values (``on_optimization_grid`` in the summary counts such points). Categorical, bool and
value-list inputs take the same values as on the optimization grid (there is nothing in between);
inputs fixed by ``[sampling] fixed`` stay fixed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign import CampaignError
from mlkaps_gpu.space import Parameter, Space


def parse_grid(text: str, space: Space) -> dict[str, int]:
    """``"32x32"`` (one size per free input, in order), ``"32"`` (all) or ``"m=32,n=16"``."""
    free = [p.name for p in space.inputs if p.name not in space.fixed_inputs]
    try:
        if "=" in text:
            sizes = {}
            for item in text.split(","):
                name, _, value = item.partition("=")
                sizes[name.strip()] = int(value)
            unknown = sorted(set(sizes) - set(free))
            if unknown:
                raise CampaignError(f"--grid {text}: unknown input(s) {unknown} (inputs: {free})")
            sizes = {name: sizes.get(name, 8) for name in free}
        else:
            parts = [int(part) for part in text.lower().split("x")]
            if len(parts) == 1:
                parts = parts * len(free)
            if len(parts) != len(free):
                raise CampaignError(
                    f"--grid {text}: {len(parts)} sizes for {len(free)} inputs {free}"
                )
            sizes = dict(zip(free, parts, strict=True))
    except ValueError:
        raise CampaignError(
            f"--grid {text}: expected sizes such as 32x32, 32 or m=32,n=16"
        ) from None
    bad = {k: v for k, v in sizes.items() if v < 1}
    if bad:
        raise CampaignError(f"--grid {text}: sizes must be >= 1 ({bad})")
    return sizes


def offset_axis(parameter: Parameter, size: int) -> np.ndarray:
    """Cell centres of ``size`` equal (geometric when log) cells over a range input."""
    if parameter.values is not None or parameter.low is None or parameter.high is None:
        return parameter.grid(size)
    fraction = (np.arange(size) + 0.5) / size
    low, high = float(parameter.low), float(parameter.high)
    if parameter.log:
        raw = low * (high / low) ** fraction
    else:
        raw = low + fraction * (high - low)
    if parameter.kind == "int":
        return np.unique(np.clip(np.round(raw), low, high).astype(np.int64))
    return raw.astype(np.float64)


def validation_grid(space: Space, sizes: Mapping[str, int]) -> pd.DataFrame:
    """The validation points: the Cartesian product of the offset axes."""
    axes = []
    for parameter in space.inputs:
        if parameter.name in space.fixed_inputs:
            axes.append(np.array([space.fixed_inputs[parameter.name]], dtype=parameter.dtype))
        else:
            axes.append(offset_axis(parameter, int(sizes.get(parameter.name, 8))))
    mesh = np.meshgrid(*[np.arange(len(a)) for a in axes], indexing="ij")
    return pd.DataFrame(
        {p.name: axes[i][mesh[i].ravel()] for i, p in enumerate(space.inputs)}
    ).astype({p.name: p.dtype for p in space.inputs})


__all__ = ["offset_axis", "parse_grid", "validation_grid"]
