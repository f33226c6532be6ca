"""The report's figures of what ships and of the search: each draws a PNG for one, two or no
numeric inputs, and the numbers they draw are the ones asked for."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu import analysis
from mlkaps_gpu.space import Parameter, Space

pytest.importorskip("matplotlib")

PNG = b"\x89PNG\r\n\x1a\n"


def space(inputs: list[Parameter]) -> Space:
    design = [
        Parameter("block", "int", values=(8, 16, 32, 64)),
        Parameter("order", "categorical", values=("ijk", "ikj")),
    ]
    return Space(inputs, design, [])


def pixels(png: bytes) -> np.ndarray:
    from matplotlib import image

    return image.imread(io.BytesIO(png), format="png")


@pytest.mark.parametrize(
    "inputs",
    [
        [Parameter("n", "int", low=16, high=1024, log=True)],
        [Parameter("m", "int", low=16, high=1024, log=True), Parameter("k", "int", low=1, high=8)],
        [Parameter("gpu", "categorical", values=("A100", "MI250X", "W6600"))],
    ],
    ids=["one input", "two inputs", "categorical input"],
)
@pytest.mark.parametrize("with_speedup", [False, True])
def test_shipped_map_draws_every_layout(inputs: list[Parameter], with_speedup: bool) -> None:
    campaign_space = space(inputs)
    rng = np.random.default_rng(0)
    grid = campaign_space.grid(4) if len(inputs) < 2 else campaign_space.grid(3)
    points = grid.reset_index(drop=True)
    labels = [f"C{1 + i % 3}" for i in range(len(points))]
    fraction = rng.uniform(0.8, 1.0, len(points))
    speedup = rng.uniform(0.5, 3.0, len(points)) if with_speedup else None
    png = analysis.shipped_map(points, campaign_space, labels, fraction, speedup)
    assert png.startswith(PNG)
    image = pixels(png)
    assert image.shape[0] > 200 and image.shape[1] > 400
    assert image[..., :3].std() > 0.05  # something drawn, not a blank canvas


def store_table(values: list[tuple[int, float, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "n": [v[0] for v in values],
            "block": 16,
            "order": "ijk",
            "time": [v[1] for v in values],
            "status": [v[2] for v in values],
        }
    )


def test_best_so_far_is_none_without_a_success_and_a_png_with_one() -> None:
    failed = store_table([(32, float("nan"), "runtime_error")])
    assert analysis.best_so_far(failed, "time", ["n"], maximize=False) is None
    table = store_table([(32, 4.0, "ok"), (64, 9.0, "ok"), (32, 2.0, "ok"), (64, 3.0, "ok")])
    png = analysis.best_so_far(table, "time", ["n"], maximize=False)
    assert png is not None and png.startswith(PNG)


def test_parameter_importance_and_parallel_coordinates_draw() -> None:
    campaign_space = space([Parameter("n", "int", low=16, high=1024, log=True)])
    png = analysis.parameter_importance(
        ["n", "block", "order"], np.array([3.0, 1.0, 0.0]), ["n"], method="test gain"
    )
    assert png.startswith(PNG)
    rng = np.random.default_rng(1)
    table = pd.DataFrame(
        {
            "n": rng.integers(16, 1024, 50),
            "block": rng.choice([8, 16, 32, 64], 50),
            "order": rng.choice(["ijk", "ikj"], 50),
            "time": rng.uniform(1.0, 5.0, 50),
            "status": "ok",
        }
    )
    lines = analysis.parallel_coordinates(table, campaign_space, "time", maximize=False, seed=0)
    assert lines is not None and lines.startswith(PNG)
    table["status"] = "runtime_error"
    assert (
        analysis.parallel_coordinates(table, campaign_space, "time", maximize=False, seed=0) is None
    )
