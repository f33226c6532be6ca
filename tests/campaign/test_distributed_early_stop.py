"""On Dask workers, a kernel that fails every time stops the campaign early, as locally."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mlkaps_gpu.campaign import Campaign, CampaignError, load_config
from mlkaps_gpu.testing import write_config

distributed = pytest.importorskip("distributed")

from .test_distributed import scheduler  # noqa: E402, F401, F811  (its running scheduler)

FAILING = """
def always_fails(row):
    raise RuntimeError("the device is not there")
"""


def _stored(out: Path) -> int:
    with sqlite3.connect(out / "samples.sqlite", timeout=5) as connection:
        return int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])


@pytest.mark.parametrize(("limit", "expected"), [("", 20), ("stop_after_failures = 8\n", 8)])
def test_a_kernel_that_always_fails_stops_early_on_dask(
    scheduler: str,  # noqa: F811 (the fixture imported above)
    kernel_path: Path,
    tmp_path: Path,
    limit: str,
    expected: int,
) -> None:
    (kernel_path / "failing_kernel.py").write_text(FAILING)
    config = write_config(kernel_path, budget=400, batch=4, name="dask.toml")
    text = config.read_text().replace("toy_kernel:model", "failing_kernel:always_fails")
    text = text.replace("batch_size = 4\n", "batch_size = 4\n" + limit)
    execution = f'backend = "dask"\nscheduler = "{scheduler}"\nworkers = 2\nin_flight = 1\n'
    config.write_text(text + "\n[execution]\n" + execution)
    out = tmp_path / "run"
    campaign = Campaign.create_or_resume(load_config(config), out)
    try:
        with pytest.raises(CampaignError, match=f"the first {expected} measurements") as error:
            campaign.sample()
    finally:
        campaign.close()
    assert "the device is not there" in str(error.value)
    assert _stored(out) == expected  # not the budget of 400
