"""Environment capture: recorded in the campaign, shown in the header, checked on use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlkaps_gpu.campaign._environment import (
    capture_environment,
    environment_differences,
    summary_line,
)
from mlkaps_gpu.cli._main import main
from mlkaps_gpu.testing import write_config


def test_capture_has_identity_fields() -> None:
    environment = capture_environment()
    for field in ("cpu_model", "cpu_cores", "machine", "gpu_name", "packages", "c_compiler"):
        assert field in environment
    assert environment["cpu_cores"] >= 1
    assert "numpy" in environment["packages"]
    assert environment_differences(environment, environment) == []


def test_differences_name_the_field() -> None:
    recorded = {"cpu_model": "A", "cpu_cores": 2, "machine": "x", "gpu_name": "H100"}
    current = dict(recorded, gpu_name="A100")
    assert environment_differences(recorded, current) == ["gpu_name: 'H100' -> 'A100'"]


def test_two_generations_of_one_cpu_name_differ_and_older_records_do_not_warn() -> None:
    """``AMD EPYC`` names several generations: the family, model, stepping and cache tell
    them apart; an environment recorded before ``cpu_id`` existed is not compared on it."""
    recorded = {"cpu_model": "AMD EPYC", "cpu_id": "family 23, model 49, cache 512 KB"}
    current = dict(recorded, cpu_id="family 25, model 17, cache 1024 KB")
    assert environment_differences(recorded, current) == [
        "cpu_id: 'family 23, model 49, cache 512 KB' -> 'family 25, model 17, cache 1024 KB'"
    ]
    older = {"cpu_model": "AMD EPYC"}
    assert environment_differences(older, current) == []


def test_campaign_records_environment_and_warns_on_mismatch(
    kernel_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "campaign"
    assert (
        main(["--quiet", "tune", str(write_config(kernel_path, budget=40)), "--out", str(out)]) == 0
    )
    recorded = json.loads((out / "environment.json").read_text())
    assert recorded["cpu_model"] == capture_environment()["cpu_model"]
    header = (out / "toy.h").read_text()
    assert "measured_on: " + summary_line(recorded) in header.replace("\n *   ", " ")
    capsys.readouterr()
    assert main(["select", str(out), "n=100"]) == 0
    assert "warning" not in capsys.readouterr().err
    recorded["cpu_model"] = "Some Other CPU"
    (out / "environment.json").write_text(json.dumps(recorded))
    assert main(["select", str(out), "n=100"]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "cpu_model: 'Some Other CPU'" in err
