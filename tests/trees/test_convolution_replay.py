"""The replayed GPU convolution (needs ``$MLKAPS_GPU_DATA``): joint trees valid for every GPU,
header equal to ``select``; the per-parameter trees' constraint violations are counted."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from mlkaps_gpu.codegen import boundary_inputs, render_header, verify_header
from mlkaps_gpu.trees import constraint_violations, fit_selector

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))
replay_models = importlib.import_module("replay_models")

pytestmark = pytest.mark.skipif(
    not replay_models.replay_available(), reason="MLKAPS_GPU_DATA (replay data) is not set"
)


@pytest.fixture(scope="module")
def convolution():
    return replay_models.convolution_model()


@pytest.mark.parametrize("mode", ["joint", "per_parameter"])
def test_no_invalid_configuration_for_any_gpu(convolution, mode: str) -> None:
    space = convolution.space
    fitted = fit_selector(convolution.optima, space, convolution.cost, mode=mode)
    dense = space.grid(100)  # every GPU: the only input
    report = constraint_violations(fitted.selector, space, dense)
    assert report.n_invalid_selected == 0
    if mode == "joint":
        assert report.n_invalid_trees == 0
        assert fitted.sweep.table["mean_regret"].iloc[-1] < 1e-9  # one leaf per GPU at most


@pytest.mark.compiler
def test_convolution_header_equals_select(convolution, tmp_path: Path) -> None:
    space = convolution.space
    fitted = fit_selector(convolution.optima, space, convolution.cost, max_depth=2)
    header = render_header(fitted.selector, "convolution")
    assert "fmod(" in header  # 'block_size_x % 32' compiled to C
    table = boundary_inputs(fitted.selector, 2000, np.random.default_rng(0))
    report = verify_header(fitted.selector, header, table, prefix="convolution", workdir=tmp_path)
    assert report.ok, str(report)
