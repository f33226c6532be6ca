"""PyTorch AutoHeuristic data beside the project: what Inductor runs without autotuning, and the
data's choice behind each answer of a replay campaign's header."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchkit.inputs_truth import Truth

#: Inductor's FlexAttention forward defaults on an sm80 GPU, (dtype, head dim) -> (BLOCK_M,
#: BLOCK_N, num_warps, num_stages) (torch/_inductor/kernel/flex_attention.py,
#: ``_a100_default_config``; other head dims: 64, 64 in float32, else 128, 64; 4 warps, 3 stages)
FLEX_SM80_DEFAULTS = {
    ("float32", 64): (128, 32, 4, 3),
    ("float32", 128): (128, 32, 4, 3),
    ("float32", 256): (64, 16, 4, 3),
    ("bfloat16", 64): (128, 64, 4, 3),
    ("bfloat16", 128): (128, 64, 8, 3),
    ("bfloat16", 256): (32, 64, 4, 3),
    ("float16", 64): (128, 64, 4, 3),
    ("float16", 128): (128, 64, 8, 3),
    ("float16", 256): (32, 64, 4, 3),
}


def inductor_default(meta: dict, truth: Truth) -> tuple[str, np.ndarray] | None:
    """Inductor's choice without autotuning, where known: mixed_mm's extern fallback, and
    FlexAttention's default config on an sm80 GPU (:data:`FLEX_SM80_DEFAULTS`; the head dim is
    ``q_stride_0 / (h * m)``, the query's elements per batch over heads and length). None for
    other kernels and GPUs."""
    name = meta.get("name")
    configs = truth.configs
    if name == "mixed_mm":
        match = np.flatnonzero(configs["kind"].str.startswith("extern_fallback"))
        if len(match):
            return "fixed default (Inductor's extern fallback)", np.full(truth.n_points, match[0])
        return None
    capability = list(meta.get("device_capa") or [0, 0])
    needed = {"dtype", "q_stride_0", "h", "m"}
    if name != "flex_attention" or capability[0] != 8 or not needed <= set(truth.inputs):
        return None
    index = {
        tuple(int(row[k]) for k in ("BLOCK_M", "BLOCK_N", "numwarps", "numstages")): i
        for i, row in configs.iterrows()
        if row["kind"] == "triton"
    }
    inputs = truth.inputs
    head_dim = inputs["q_stride_0"] // (inputs["h"] * inputs["m"])
    answers = []
    for dtype, dim in zip(inputs["dtype"].astype(str), head_dim, strict=True):
        short = dtype.removeprefix("torch.")
        fallback = (64, 64, 4, 3) if short == "float32" else (128, 64, 4, 3)
        answers.append(index.get(FLEX_SM80_DEFAULTS.get((short, int(dim)), fallback), -1))
    return "fixed default (Inductor's sm80 default config)", np.array(answers, dtype=np.int64)


def header_choices(truth: Truth, chosen: pd.DataFrame) -> np.ndarray:
    """The truth's configuration index of each answer of a replay header: by its ``choice``
    string (a ``choice`` column, or ``mlkaps_gpu.executors.choice_strings`` of its design rows),
    else by design columns named like the parsed choice's (case and - / _ ignored)."""
    import mlkaps_gpu.executors as executors

    where = {label: i for i, label in enumerate(truth.labels)}
    if "choice" in chosen.columns:
        names = chosen["choice"].astype(str).tolist()
        return np.array([where.get(c, -1) for c in names], dtype=np.int64)
    if hasattr(executors, "choice_strings"):
        names = executors.choice_strings(chosen.reset_index(drop=True)).tolist()
        return np.array([where.get(c, -1) for c in names], dtype=np.int64)

    def plain(name: str) -> str:
        return name.lower().replace("-", "").replace("_", "")

    theirs = {plain(c): c for c in chosen.columns}
    missing = [c for c in truth.configs.columns if plain(c) not in theirs]
    if missing:
        raise ValueError(
            f"cannot map the header's answers ({list(chosen.columns)}) to the data's choices: "
            f"no column for {missing}"
        )
    renamed = chosen.rename(columns={theirs[plain(c)]: c for c in truth.configs.columns})
    return truth.config_index(renamed)


def walk_ranking(truth: Truth, ranked: list[np.ndarray], counts: np.ndarray) -> np.ndarray:
    """Per point, the first of a header's ranked answers (``ranked[r]``: the truth's index of
    every point's rank-``r`` answer, -1 where the data has no such choice) that the point lists,
    as a library that cannot run a configuration it did not generate walks the ranking; the
    first answer where none is listed (it then scores as the point's slowest)."""
    answers = np.array(ranked[0], dtype=np.int64)
    found = np.zeros(truth.n_points, dtype=bool)
    listed = truth.listed
    points = np.arange(truth.n_points)
    for rank, indices in enumerate(ranked):
        indices = np.asarray(indices, dtype=np.int64)
        usable = (rank < counts) & (indices >= 0) & ~found
        usable[usable] = listed[points[usable], indices[usable]]
        answers[usable] = indices[usable]
        found |= usable
    return answers
