"""Relative paths of a configuration (transfer sources) keep their meaning when the campaign is
opened again later, from another working directory."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign, load_config
from mlkaps_gpu.testing import write_config


def test_relative_transfer_sources_resolve_where_the_config_was(
    kernel_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source_config = write_config(kernel_path, budget=40, name="source.toml")
    Campaign.create_or_resume(load_config(source_config), kernel_path / "runs" / "first").run()
    target_config = kernel_path / "target.toml"
    text = write_config(kernel_path, budget=40, name="plain.toml").read_text()
    target_config.write_text(text + '\n[transfer]\nsources = ["runs/first"]\n')
    monkeypatch.chdir(tmp_path)  # neither the config's folder nor the campaign's
    campaign = Campaign.create_or_resume(load_config(target_config), tmp_path / "second")
    campaign.run()
    assert len(campaign.transfer_samples()) == 40
    again = Campaign.open(tmp_path / "second")
    assert len(again.transfer_samples()) == 40
    assert isinstance(again.load_selector().select(pd.DataFrame({"n": [64]})), pd.DataFrame)
