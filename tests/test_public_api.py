"""The public API of ``import mlkaps_gpu``: light to import, one call to tune a campaign."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import mlkaps_gpu
from mlkaps_gpu.testing import write_config

HEAVY = ("lightgbm", "sklearn", "scipy", "pymoo", "pandas", "cupy", "dask", "matplotlib")


def test_import_loads_no_heavy_library() -> None:
    code = (
        "import sys, mlkaps_gpu; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"


def test_public_names_resolve_to_their_packages() -> None:
    from mlkaps_gpu.campaign import Campaign, load_config
    from mlkaps_gpu.codegen import render_header
    from mlkaps_gpu.space import Space
    from mlkaps_gpu.trees import Selector
    from mlkaps_gpu.validation import merge, validate

    assert mlkaps_gpu.Campaign is Campaign
    assert mlkaps_gpu.load_config is load_config
    assert mlkaps_gpu.Space is Space
    assert mlkaps_gpu.Selector is Selector
    assert mlkaps_gpu.render_header is render_header
    assert mlkaps_gpu.validate is validate
    assert mlkaps_gpu.merge is merge
    assert set(mlkaps_gpu.__all__) <= set(dir(mlkaps_gpu))
    assert set(mlkaps_gpu.__all__) == {"__version__", *mlkaps_gpu._PUBLIC}
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = mlkaps_gpu.nope


def test_tune_runs_a_campaign_end_to_end(kernel_path: Path, tmp_path: Path) -> None:  # noqa: F811
    config = write_config(kernel_path, budget=60, batch=20)
    stages: set[str] = set()
    campaign = mlkaps_gpu.tune(
        config, out=tmp_path / "run", progress=lambda stage, done, total: stages.add(stage)
    )
    assert campaign.done("trees")
    header = campaign.header_path.read_text()
    assert "toy_select" in header
    rendered = mlkaps_gpu.render_header(campaign.load_selector(), "toy")
    assert rendered.split("*/", 1)[1] == header.split("*/", 1)[1]  # same code, other provenance
    assert "sampling" in stages
    # resumes (nothing left to do) and gives the same header
    again = mlkaps_gpu.tune(str(config), out=tmp_path / "run")
    assert again.header_path.read_text() == header


def test_tune_from_python_objects_drives_the_kernel_through_ask_and_tell(tmp_path: Path) -> None:
    import math

    import pandas as pd

    from mlkaps_gpu.space import Parameter, Space

    space = Space(
        [Parameter("n", "int", low=16, high=4096, log=True)],
        [
            Parameter("block", "int", values=(4, 8, 16, 32, 64, 128)),
            Parameter("variant", "categorical", values=("fast", "slow")),
        ],
        ["block <= n"],
    )
    calls: list[dict] = []

    def kernel(row: dict) -> float:
        calls.append(row)
        if row["block"] == 128 and row["n"] < 300:
            raise RuntimeError("does not fit")
        slow = 0.3 if row["variant"] == "slow" else 0.0
        return math.log(row["block"] / math.sqrt(row["n"])) ** 2 + slow + row["n"] / 1000

    campaign = mlkaps_gpu.tune(out=tmp_path / "run", space=space, kernel=kernel, budget=60)
    table = campaign.store.load()
    assert len(table) == len(calls) == 60
    failed = table[table["status"] != "ok"]
    assert (failed["block"] == 128).all() and failed["message"].str.contains("does not fit").all()
    assert campaign.done("trees") and campaign.header_path.name == "mlkaps.h"
    answers = campaign.load_selector().select(pd.DataFrame({"n": [16, 4096]}))
    assert (answers["block"].to_numpy() <= [16, 4096]).all()  # valid where the space says
    with pytest.raises(TypeError, match="either config, or space"):
        mlkaps_gpu.tune("x.toml", out=tmp_path / "x", space=space, kernel=kernel, budget=5)
