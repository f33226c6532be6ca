"""Samplers on a space with fixed inputs stay on the fixed values, until exhaustion."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.sampling import SAMPLERS
from mlkaps_gpu.space import Parameter, Space


def _space() -> Space:
    return Space(
        [
            Parameter("gpu", "categorical", values=("A", "B", "C")),
            Parameter("n", "int", low=1, high=64),
        ],
        [Parameter("block", "int", values=(1, 2, 4, 8)), Parameter("flag", "bool")],
        ["block <= n"],
    ).with_fixed_inputs({"gpu": "B", "n": 4})


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_fixed_inputs_hold_until_exhaustion(name: str) -> None:
    space = _space()
    sampler = SAMPLERS[name](space, seed=1)
    seen = []
    for _ in range(5):
        rows = sampler.ask(4)
        if len(rows) == 0:
            break
        results = pd.DataFrame(
            {"time": np.arange(len(rows), dtype=float) + 1.0, "status": ["ok"] * len(rows)}
        )
        sampler.tell(rows, results)
        seen.append(rows)
    table = pd.concat(seen, ignore_index=True)
    assert set(table["gpu"]) == {"B"} and set(table["n"]) == {4}
    # 3 blocks (1, 2, 4) x 2 flags are valid at n = 4
    assert len(table) == 6
    assert space.grid(5)[["gpu", "n"]].drop_duplicates().to_dict("records") == [
        {"gpu": "B", "n": 4}
    ]
    assert space.features(table).shape == (6, 4)
