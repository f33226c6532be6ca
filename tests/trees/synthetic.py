"""Synthetic optima and fitted selectors that the tree and the header tests share (their fixtures
are registered by tests/conftest.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.space import Space
from mlkaps_gpu.space._parameters import Parameter
from mlkaps_gpu.trees import (
    DecisionModel,
    JointSelector,
    LeafOutput,
    PerParameterSelector,
    TreeStructure,
)

N = Parameter("n", "int", low=1, high=2**30, log=True)
GPU = Parameter("gpu", "categorical", values=("A100", "W6600"))
DENSITY = Parameter("density", "float", low=0.0, high=1.0)
BLOCK = Parameter("block", "int", values=(32, 64, 128, 256))
ALGO = Parameter("algo", "categorical", values=("tiled", "panel-recursive", "naive"))
SHARED = Parameter("use_shared", "bool")
UNROLL = Parameter("unroll", "int", low=1, high=16)
DESIGN = (BLOCK, ALGO, SHARED, UNROLL)


def synthetic_optima(rng: np.random.Generator, *, with_density: bool) -> pd.DataFrame:
    """A grid of inputs with a piecewise-constant 'optimum' plus some noise, as a campaign
    would produce: optima move with log(n), differ between GPUs and (optionally) density."""
    rows = []
    densities = DENSITY.grid(9) if with_density else [None]
    for n in N.grid(48):
        for gpu in GPU.domain_values().tolist():
            for density in densities:
                level = np.log2(float(n)) + (3.0 * density if density is not None else 0.0)
                noise = rng.integers(0, 3) == 0
                row = {
                    "n": int(n),
                    "gpu": gpu,
                    "block": int(BLOCK.domain_values()[min(3, int(level / 8) + int(noise))]),
                    "algo": ALGO.domain_values()[
                        int(level > (8 if gpu == "A100" else 12))
                        + int(level > (20 if gpu == "A100" else 24))
                    ],
                    "use_shared": bool(level > 12) != bool(noise and gpu == "W6600"),
                    "unroll": int(1 + (level * 7 + rng.integers(0, 2)) % 16),
                }
                if density is not None:
                    row["density"] = float(density)
                rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture(scope="session")
def params() -> SimpleNamespace:
    """The parameters of the synthetic campaign."""
    return SimpleNamespace(
        n=N, gpu=GPU, density=DENSITY, block=BLOCK, algo=ALGO, shared=SHARED, unroll=UNROLL
    )


@pytest.fixture(scope="session")
def strict_c() -> list[str]:
    return ["gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]


@pytest.fixture(scope="session")
def strict_cxx() -> list[str]:
    return ["g++", "-std=c++17", "-Wall", "-Wextra", "-pedantic", "-Werror"]


@pytest.fixture(scope="session")
def optima() -> pd.DataFrame:
    return synthetic_optima(np.random.default_rng(7), with_density=False)


@pytest.fixture(scope="session")
def selector(optima: pd.DataFrame) -> PerParameterSelector:
    return PerParameterSelector(max_depth=8).fit(optima, [N, GPU], DESIGN)


@pytest.fixture(scope="session")
def optima_with_density() -> pd.DataFrame:
    return synthetic_optima(np.random.default_rng(11), with_density=True)


@pytest.fixture(scope="session")
def density_selector(optima_with_density: pd.DataFrame) -> PerParameterSelector:
    return PerParameterSelector(max_depth=6, min_samples_leaf=2).fit(
        optima_with_density, [N, GPU, DENSITY], DESIGN
    )


@pytest.fixture(scope="session")
def tiny_model() -> DecisionModel:
    """A hand-built model (no scikit-learn fitting) for the golden header."""
    size = Parameter("size", "int", low=1, high=4096, log=True)
    dtype = Parameter("dtype", "categorical", values=("fp32", "fp-64"))
    load = Parameter("load", "float", low=0.0, high=1.0)
    tile = Parameter("tile", "int", values=(16, 32, 64))
    algo = Parameter("algo", "categorical", values=("tiled", "panel-recursive"))
    fused = Parameter("fused", "bool")
    ratio = Parameter("ratio", "float", low=0.0, high=1.0, levels=5)
    leaf = -1
    tile_tree = TreeStructure(
        children_left=[1, leaf, 3, leaf, leaf],
        children_right=[2, leaf, 4, leaf, leaf],
        feature=[0, -2, 2, -2, -2],
        threshold=[100.5, -2.0, 0.25, -2.0, -2.0],
        nan_goes_left=[False, False, True, False, False],
    )
    algo_tree = TreeStructure(
        children_left=[1, leaf, leaf],
        children_right=[2, leaf, leaf],
        feature=[1, -2, -2],
        threshold=[0.5, -2.0, -2.0],
        nan_goes_left=[True, False, False],
    )
    fused_tree = TreeStructure(
        children_left=[leaf],
        children_right=[leaf],
        feature=[-2],
        threshold=[-2.0],
        nan_goes_left=[False],
    )
    ratio_tree = TreeStructure(
        children_left=[1, leaf, 3, leaf, leaf],
        children_right=[2, leaf, 4, leaf, leaf],
        feature=[2, -2, 0, -2, -2],
        threshold=[0.1, -2.0, 16777219.0, -2.0, -2.0],
        nan_goes_left=[False, False, False, False, False],
    )
    return DecisionModel(
        inputs=(size, dtype, load),
        trees=(tile_tree, algo_tree, fused_tree, ratio_tree),
        tree_names=("tile", "algo", "fused", "ratio"),
        outputs=(
            LeafOutput(tile, 0, [0, 1, 2]),
            LeafOutput(algo, 1, [1, 0]),
            LeafOutput(fused, 2, [1]),
            LeafOutput(ratio, 3, [0, 3, 4]),
        ),
        description="hand-built test model",
    )


# --------------------------------------------------------------- a constrained synthetic space
C_N = Parameter("n", "int", low=16, high=4096, log=True)
C_DENSITY = Parameter("density", "float", low=0.0, high=1.0)
C_BLOCK = Parameter("block", "int", values=(16, 32, 64, 128, 256))
CONSTRAINTS = (
    "block <= n",
    "unroll * block <= 2048",
    "algo != 'naive' or block % 64 == 0",
    "use_shared or density < 0.75",
)


def constrained_space() -> Space:
    return Space([C_N, GPU, C_DENSITY], [C_BLOCK, ALGO, SHARED, UNROLL], CONSTRAINTS)


def synthetic_time(table: pd.DataFrame) -> np.ndarray:
    """A smooth cost whose optimum moves with every input (block with n, unroll with density,
    algo with the GPU and n, use_shared with density)."""
    n = table["n"].to_numpy(dtype=float)
    density = table["density"].to_numpy(dtype=float)
    block = table["block"].to_numpy(dtype=float)
    unroll = table["unroll"].to_numpy(dtype=float)
    algo = table["algo"].to_numpy()
    a100 = (table["gpu"] == "A100").to_numpy()
    shared = table["use_shared"].to_numpy(dtype=bool)
    size = 1.0 + 0.5 * np.abs(np.log2(block) - np.log2(n))
    unrolling = 1.0 + 0.05 * np.abs(unroll - (2.0 + 14.0 * density))
    algo_factor = np.select(
        [algo == "tiled", algo == "panel-recursive"],
        [np.where(a100, 1.0, 1.1), np.where(n > 500, 1.02, 1.2)],
        np.where(n < 100, 0.95, 1.5),
    )
    shared_factor = np.where(shared, np.where(density > 0.5, 0.9, 1.05), 1.0)
    return 1e-3 * n * size * unrolling * algo_factor * shared_factor


def exhaustive_optima(space: Space, cost, grid: pd.DataFrame) -> pd.DataFrame:
    """The least-cost valid configuration at every grid point."""
    rows = []
    for point in range(len(grid)):
        inputs = grid.iloc[[point]]
        valid = space.valid_design_codes({n: inputs[n].iloc[0] for n in space.constrained_inputs})
        table = space.assemble(inputs.iloc[np.zeros(len(valid), dtype=int)], valid)
        rows.append(table.iloc[int(np.argmin(cost(table)))])
    optima = pd.DataFrame(rows).reset_index(drop=True)
    return optima.astype({n: space.parameters[n].dtype for n in space.names})


@pytest.fixture(scope="session")
def constrained() -> SimpleNamespace:
    """A space with input-dependent constraints, its cost model and exhaustive optima."""
    space = constrained_space()
    # the Cartesian grid without the validity breaks of ``Space.grid``: leaves whose best
    # candidate stops being valid between grid points (the case validity splits are for)
    grid = space._cartesian_grid({"n": 12, "gpu": 2, "density": 5})
    return SimpleNamespace(
        space=space, score=synthetic_time, optima=exhaustive_optima(space, synthetic_time, grid)
    )


@pytest.fixture(scope="session")
def joint_selector(constrained: SimpleNamespace) -> JointSelector:
    space = constrained.space
    return JointSelector(max_depth=6).fit(
        constrained.optima, space.inputs, space.design, space=space, score=constrained.score
    )


@pytest.fixture(scope="session")
def checked_selector(constrained: SimpleNamespace) -> PerParameterSelector:
    """Shallow per-parameter trees over the constrained space: their raw combinations violate
    constraints, so the header's run-time check and fallback matter."""
    space = constrained.space
    return PerParameterSelector(max_depth=3).fit(
        constrained.optima, space.inputs, space.design, space=space
    )
