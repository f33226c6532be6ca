"""Ask / tell: a campaign driven only by the user's own measurement loop, killed half way and
resumed, ends in the same kind of verified header as ``tune``."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign, CampaignError, load_config
from mlkaps_gpu.campaign._ask_tell import AskTellError

CONFIG = """\
[campaign]
name = "outside"
seed = 4

[kernel]
executor = "external"

[inputs]
n = { type = "int", range = [16, 4096], log = true }

[design]
block = { type = "int", values = [4, 8, 16, 32, 64, 128] }
variant = { type = "categorical", values = ["fast", "slow"] }
constraints = ["block <= n"]

[sampling]
budget = 80
batch_size = 20

[optimization]
grid = { n = 16 }

[trees]
prefix = "outside"
verify_inputs = 500
"""


def measure(row: dict) -> float:
    """The user's 'instrument': best block near sqrt(n), the slow variant 30 % slower."""
    penalty = 0.0 if row["variant"] == "fast" else 0.3
    return math.log(row["block"] / math.sqrt(row["n"])) ** 2 + penalty + row["n"] / 1000.0


def loop(campaign: Campaign, batches: int | None = None) -> int:
    told = 0
    while not campaign.sampling_complete() and (batches is None or batches > 0):
        rows = campaign.ask()
        rows["time"] = [measure(row) for row in rows.to_dict("records")]
        told += campaign.tell(rows)
        batches = None if batches is None else batches - 1
    return told


KILLED_LOOP = """
import math, os, signal, sys
sys.path.insert(0, {tests!r})
from mlkaps_gpu.campaign import Campaign, load_config
from test_ask_tell import loop
campaign = Campaign.create_or_resume(load_config({config!r}), {out!r})
loop(campaign, batches=2)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.integration
def test_ask_tell_killed_half_way_resumes_to_a_verified_header(tmp_path: Path) -> None:
    config = tmp_path / "outside.toml"
    config.write_text(CONFIG)
    out = tmp_path / "run"
    script = KILLED_LOOP.format(tests=str(Path(__file__).parent), config=str(config), out=str(out))
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], check=False)
    assert killed.returncode == -9
    campaign = Campaign.create_or_resume(load_config(config), out)
    stored = len(campaign.store)
    assert stored == 40  # two whole batches survived the kill
    assert loop(campaign) > 0
    assert campaign.sampling_complete()
    with pytest.raises(AskTellError, match="budget is spent"):
        campaign.ask()
    campaign.run()
    verification = json.loads((out / "verification.json").read_text())
    assert verification["mismatches"] == 0
    assert "outside_select" in campaign.header_path.read_text()
    # the asked rows were never measured twice, and every stored row is the user's
    table = campaign.store.load()
    assert not table.duplicated(campaign.space.names).any()
    assert (table["status"] == "ok").all()


def test_tell_refuses_what_it_cannot_store(tmp_path: Path) -> None:
    config = tmp_path / "outside.toml"
    config.write_text(CONFIG)
    campaign = Campaign.create_or_resume(load_config(config), tmp_path / "run")
    rows = campaign.ask(4)
    assert list(rows.columns) == ["n", "block", "variant"] and len(rows) == 4
    with pytest.raises(AskTellError, match="no column 'time'"):
        campaign.tell(rows)
    bad = rows.assign(time=1.0)
    bad.loc[0, "block"] = 4096  # not a value of block
    with pytest.raises(AskTellError, match="row 0 .* not a valid configuration"):
        campaign.tell(bad)
    with pytest.raises(AskTellError, match="status ok but no finite value"):
        campaign.tell(rows.assign(time=[1.0, float("nan"), 1.0, 1.0], status="ok"))
    with pytest.raises(AskTellError, match="unknown status 'crashed'"):
        campaign.tell(rows.assign(time=1.0, status="crashed"))
    assert len(campaign.store) == 0  # nothing half-stored
    # a failure told without a value is stored as a failed row
    told = rows.assign(time=[1.0, float("nan"), 2.0, 3.0])
    assert campaign.tell(told) == 4
    assert campaign.store.load()["status"].tolist() == ["ok", "runtime_error", "ok", "ok"]
    # running the pipeline before the budget is told says what to do
    with pytest.raises(CampaignError, match="ask and tell"):
        campaign.run()
    assert isinstance(pd.DataFrame(), pd.DataFrame)
