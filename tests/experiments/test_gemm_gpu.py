"""experiments/gemm_gpu.py end to end on the C GEMM through cffi (``--config``), at a small
budget: tune, merge with the expert, the random sizes measured, the results written."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "gemm_gpu.py"

CONFIG = """
[campaign]
name = "gemm_cpu_check"
seed = 0
[kernel]
executor = "cffi"
builtin = "gemm"
[sampling]
budget = 40
batch_size = 10
[optimization]
grid = { m = 3, n = 3, k = 3 }
[trees]
prefix = "gemm_cpu"
"""

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)"),
    pytest.mark.integration,
]


def test_gemm_script_tunes_merges_and_measures_random_sizes(tmp_path: Path) -> None:
    config = tmp_path / "gemm_cpu.toml"
    config.write_text(CONFIG)
    results = tmp_path / "results" / "gemm.md"
    argv = [sys.executable, str(SCRIPT), "--config", str(config), "--out", str(tmp_path / "run")]
    argv += ["--merge-grid", "2", "--heldout", "4", "--rounds", "2", "--results", str(results)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    text = results.read_text()
    assert text.startswith("> command: python experiments/gemm_gpu.py")
    assert "tuned: geomean" in text and "merged: geomean" in text and "depth sweep" in text
    table = pd.read_csv(results.with_suffix(".csv"), comment="#")
    assert len(table) == 4
    assert {"tuned", "merged", "tuned_ms", "merged_ms", "expert_ms"} <= set(table.columns)
    assert (table[["tuned_ms", "merged_ms", "expert_ms"]] > 0).all().all()
    assert (tmp_path / "run" / "merge" / "summary.json").is_file()
