"""Fixtures of the executor tests: the replay data folder and synthetic Kernel Tuner caches."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

GPUS = ("A100", "A4000", "MI250X", "W6600", "W7800")


@pytest.fixture(scope="session")
def replay_data() -> Path:
    """The replay data folder (env ``MLKAPS_GPU_DATA``); skips when unset or missing."""
    root = os.environ.get("MLKAPS_GPU_DATA")
    if not root:
        pytest.skip("MLKAPS_GPU_DATA is not set")
    path = Path(root)
    if not (path / "convolution_6gpu").is_dir() or not (path / "syr2k_cpu").is_dir():
        pytest.skip(f"MLKAPS_GPU_DATA={root} does not hold the replay data")
    return path


@pytest.fixture(scope="session")
def convolution_caches(replay_data: Path) -> dict[str, Any]:
    """The five aligned convolution caches, loaded once per session."""
    from mlkaps_gpu.executors._kernel_tuner_cache import load_kernel_tuner_cache

    folder = replay_data / "convolution_6gpu"
    return {gpu: load_kernel_tuner_cache(folder / f"{gpu}.json.gz") for gpu in GPUS}


def cache_document(
    entries: Mapping[tuple[Any, ...], Mapping[str, Any]],
    *,
    keys: Sequence[str] = ("bx", "by", "mode"),
    tune_params: Mapping[str, Sequence[Any]] | None = None,
) -> dict[str, Any]:
    """A Kernel Tuner cache document whose entries are given by their parameter values."""
    if tune_params is None:
        tune_params = {"bx": [16, 32, 64], "by": [1, 2], "mode": ["a", "b"]}
    cache = {}
    for values, result in entries.items():
        entry = dict(zip(keys, values, strict=True))
        entry.update(result)
        cache[",".join(str(v) for v in values)] = entry
    return {
        "device_name": "Test GPU",
        "kernel_name": "test_kernel",
        "problem_size": [1024],
        "tune_params_keys": list(keys),
        "tune_params": {k: list(v) for k, v in tune_params.items()},
        "objective": "time",
        "cache": cache,
    }


@pytest.fixture
def write_cache(tmp_path: Path) -> Callable[..., Path]:
    """Write a cache document as plain JSON or gzip; returns the path."""

    def write(document: Any, name: str = "cache.json", *, gz: bool = False) -> Path:
        path = tmp_path / name
        text = document if isinstance(document, str) else json.dumps(document)
        if gz:
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)
        return path

    return write


@pytest.fixture
def make_document() -> Callable[..., dict[str, Any]]:
    """:func:`cache_document`, as a fixture (test modules do not import conftest)."""
    return cache_document
