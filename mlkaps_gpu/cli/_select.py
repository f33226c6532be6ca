"""``mlkaps-gpu select``: answer with the configuration chosen by the compiled header.

The header of a campaign is compiled once through cffi (cached under ``DIR/build/``) and called
with the given inputs, so the answer is the one a library embedding the header would get.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mlkaps_gpu.campaign import Campaign, CampaignError, EnvironmentMismatchWarning
from mlkaps_gpu.codegen import CompiledHeader
from mlkaps_gpu.space import parse_value


def parse_assignments(assignments: Sequence[str]) -> dict[str, str]:
    """``["m=300", "n=900"]`` -> ``{"m": "300", "n": "900"}``."""
    values: dict[str, str] = {}
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep or not name:
            raise CampaignError(f"'{assignment}': expected name=value")
        values[name.strip()] = value.strip()
    return values


def select_with_header(directory: str | Path, assignments: Mapping[str, str]) -> dict[str, Any]:
    """The header's configuration for one input point, as a JSON-able dict."""
    campaign = Campaign.open(directory)
    if not campaign.done("trees"):
        raise CampaignError(f"{directory}: the campaign has no header yet; run tune first")
    for difference in campaign.environment_warnings():
        warnings.warn(
            f"{directory}: this machine differs from the one the campaign measured on "
            f"({difference}); its configurations may not suit this machine",
            EnvironmentMismatchWarning,
            stacklevel=2,
        )
    space = campaign.space
    unknown = sorted(set(assignments) - set(space.input_names))
    if unknown:
        raise CampaignError(f"unknown input(s) {unknown} (inputs: {space.input_names})")
    missing = [n for n in space.input_names if n not in assignments]
    if missing:
        raise CampaignError(f"missing input(s) {missing}: give name=value for each")
    row = {p.name: [parse_value(p, assignments[p.name])] for p in space.inputs}
    selector = campaign.load_selector()
    compiled = CompiledHeader(
        selector,
        campaign.header_path.read_text(encoding="utf-8"),
        prefix=campaign.config.trees.prefix,
        build_dir=campaign.directory / "build",
    )
    answer = compiled(pd.DataFrame(row)).iloc[0].to_dict()
    return {
        name: (value.item() if hasattr(value, "item") else value) for name, value in answer.items()
    }
