"""Class 3 end to end: campaigns whose constraints divide by zero, take `x ** 0` of an undefined
value, mix integer and float division, overflow or carry infinite literals run to the end, and
the generated header's validity check agrees with Python's on every configuration.

(The language-level proof is tests/space/test_constraint_semantics.py: 100,000+ random
expressions x values compared between numpy and compiled C.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import ReadOnlyCampaign, load_config, prepare
from mlkaps_gpu.codegen._verify_validity import verify_is_valid
from tests.hostile.user import Folder, assert_clean, cli, store_rows

pytestmark = pytest.mark.integration

FACTOR = 'f = { type = "float", values = [0.3, 0.5, 1.0] }\n'


@pytest.mark.parametrize(
    "constraints",
    [
        # the example: at block = 128 and f = 0.3 the division is by zero
        '["block < 128 or ((block - 128) / (f - 0.3)) ** 0 > 0", "block <= n"]',
        '["n % block == 0 or block // (n - n) == 1 or block * 2 <= n", "f * 2 != 1"]',
        '["block ** 0.5 <= n ** 0.5", "max(block, 2) ** -1 > 0", "abs(f - 0.3) < 1e308 * 10"]',
        '["n / block / (f - 0.3) > 2 or f < 0.4", "n - 1e308 * 10 < 0 < 1 < 2 < n"]',
    ],
    ids=["issue", "zero-division", "powers", "overflow-chains"],
)
def test_header_and_python_agree_on_hostile_constraints(
    folder: Folder, constraints: str, tmp_path: Path
) -> None:
    config = folder.config(constraints=constraints, design_extra=FACTOR, budget=40)
    out = folder.path / "run"
    assert_clean(cli("tune", config, "--out", out, cwd=folder.path))
    assert len(store_rows(out)) == 40
    space = prepare(load_config(config)).space
    selector = ReadOnlyCampaign(out).load_selector()  # selector.json: data, never a pickle
    header = (out / "hostile.h").read_text()
    n = np.unique(np.r_[16, 17, 64, 100, 127, 128, 256, 1000, 4096, np.geomspace(16, 4096, 40)])
    design = pd.MultiIndex.from_product(
        [n.astype(np.int64), [4, 8, 16, 32, 64, 128], [0.3, 0.5, 1.0]], names=["n", "block", "f"]
    ).to_frame(index=False)
    python = space.is_valid(design)
    c = verify_is_valid(selector, header, design, prefix="hostile", workdir=tmp_path)
    disagree = design[python != c]
    assert disagree.empty, disagree.head()
    assert python.any() and not python.all()  # the constraints do decide something
