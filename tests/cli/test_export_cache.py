"""``mlkaps-gpu export-cache``: a campaign's measurements as a Kernel Tuner cache that Kernel
Tuner's own simulation mode replays, and that the project's cache loader reads back."""

from __future__ import annotations

import json
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign, parse_config
from mlkaps_gpu.cli import main
from mlkaps_gpu.executors import load_kernel_tuner_cache

KERNEL = """
def cost(row):
    # best: block_size_x 64, tile 2 at n = 100; every (n, configuration) pair is distinct
    penalty = abs(row["block_size_x"] - 64) / 64 + abs(row["tile"] - 2) * 0.3
    return row["n"] / 100.0 + penalty
"""

CONFIG = """\
[campaign]
name = "toy_kt"
seed = 1

[kernel]
executor = "python"
function = "kt_kernel:cost"

[inputs]
n = { type = "int", values = [100, 200] }

[design]
block_size_x = { type = "int", values = [16, 32, 64] }
tile = { type = "int", values = [1, 2] }

[sampling]
method = "random"
budget = 12
batch_size = 12

[optimization]
grid = { n = 2 }

[trees]
prefix = "kt"
verify_inputs = 200
"""


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    folder = tmp_path_factory.mktemp("export_cache")
    (folder / "kt_kernel.py").write_text(textwrap.dedent(KERNEL))
    path = folder / "kt.toml"
    path.write_text(CONFIG)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(folder))
        sys.modules.pop("kt_kernel", None)
        campaign = Campaign.create_or_resume(parse_config(CONFIG, path=path), folder / "run")
        # measure the whole space (the sampling stage then finds its budget spent)
        rows = pd.DataFrame(
            [
                {"n": n, "block_size_x": block, "tile": tile}
                for n in (100, 200)
                for block in (16, 32, 64)
                for tile in (1, 2)
            ]
        )
        campaign.store.append(rows, campaign.setup.executor.run(rows))
        campaign.run()
        yield campaign
    sys.modules.pop("kt_kernel", None)


def test_export_cache_writes_every_measurement_of_the_point(
    campaign: Campaign, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "n100.json"
    assert main(["export-cache", str(campaign.directory), "n=100", "--out", str(out)]) == 0
    assert "6 configurations written" in capsys.readouterr().out
    document = json.loads(out.read_text())
    assert document["tune_params_keys"] == ["block_size_x", "tile"]
    assert document["tune_params"] == {"block_size_x": [16, 32, 64], "tile": [1, 2]}
    assert document["device_name"] == "100" and document["kernel_name"] == "toy_kt"
    assert document["problem_size"] == [100]  # the numeric input values, by default
    assert document["cache"]["64,2"]["time"] == pytest.approx(1.0)
    assert document["cache"]["16,1"]["time"] == pytest.approx(1.0 + 0.75 + 0.3)
    # the project's own loader reads it back, same times
    table = load_kernel_tuner_cache(out)
    assert len(table.records) == 6 and table.n_failed() == 0
    assert table.best() == pytest.approx(1.0)
    assert table.tune_params == document["tune_params"]


def test_kernel_tuner_simulation_mode_replays_the_exported_cache(
    campaign: Campaign, tmp_path: Path
) -> None:
    kernel_tuner = pytest.importorskip("kernel_tuner")
    out = tmp_path / "n200.json"
    command = ["-q", "export-cache", str(campaign.directory), "n=200", "--out", str(out)]
    assert main([*command, "--problem-size", "200"]) == 0
    document = json.loads(out.read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results, _ = kernel_tuner.tune_kernel(
            document["kernel_name"],
            "",
            (200,),
            [],
            document["tune_params"],
            simulation_mode=True,
            cache=str(out),
            strategy="brute_force",
            quiet=True,
        )
    assert len(results) == 6
    best = min(results, key=lambda r: r["time"])
    assert (best["block_size_x"], best["tile"]) == (64, 2)
    assert best["time"] == pytest.approx(2.0)


def test_export_cache_asks_for_the_input_point(
    campaign: Campaign, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.json"
    assert main(["export-cache", str(campaign.directory), "--out", str(out)]) == 2
    assert "n=VALUE" in capsys.readouterr().err
    assert main(["export-cache", str(campaign.directory), "m=1", "--out", str(out)]) == 2
    assert "not inputs" in capsys.readouterr().err
    assert not out.exists()
