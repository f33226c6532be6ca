"""The replayed GPU convolution (``experiments/configs/convolution_replay.toml``) as a
:class:`~kernel_models.KernelModel`: its space, the *measured* time as the score, and the
measured optimum of each GPU as the optima.

The data is exhaustive (every valid configuration was measured on each GPU), so no surrogate is
needed: a configuration's score is its measured mean time, and ``inf`` where it failed or was
not measured. Needs ``$MLKAPS_GPU_DATA`` (the replay data folder).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from kernel_models import KernelModel, Table

from mlkaps_gpu.campaign import parse_config
from mlkaps_gpu.campaign._setup import prepare

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "experiments" / "configs" / "convolution_replay.toml"


def replay_available() -> bool:
    """Whether ``$MLKAPS_GPU_DATA`` points at the replay data."""
    folder = os.environ.get("MLKAPS_GPU_DATA")
    return bool(folder) and (Path(folder) / "convolution_6gpu").is_dir()


def convolution_model() -> KernelModel:
    """Space, measured-time score and per-GPU measured optima of the replayed convolution."""
    config = parse_config(CONFIG.read_text(encoding="utf-8"), path=CONFIG, label=CONFIG.name)
    setup = prepare(config)
    space = setup.space
    executor = setup.executor
    measured = executor.valid_configurations()  # type: ignore[attr-defined]
    objective = setup.objectives[0]
    keys = space.names
    lookup = {
        tuple(str(v) for v in row[:-1]): float(row[-1])
        for row in measured[[*keys, objective]].itertuples(index=False)
    }

    def measured_time(table: Table) -> np.ndarray:
        columns = [np.asarray(table[name]).astype(str) for name in keys]
        return np.array(
            [lookup.get(tuple(row), np.inf) for row in zip(*columns, strict=True)], dtype=float
        )

    gpus = list(space.parameters["gpu"].domain_values())
    rows = []
    for gpu in gpus:
        best, configuration = executor.optimum(gpu)  # type: ignore[attr-defined]
        rows.append({"gpu": gpu, **configuration, "predicted_time": best})
    optima = pd.DataFrame(rows)
    optima = optima.astype({name: space.parameters[name].dtype for name in space.names})
    return KernelModel("convolution", space, measured_time, optima)
