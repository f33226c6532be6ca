"""The paired kernel that the validation tests measure, and its campaign: tuned once per session
(the ``paired_tuned`` fixture of conftest.py), copied for each module that measures into it."""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlkaps_gpu.campaign import Campaign, parse_config
from mlkaps_gpu.testing import TOY_CONFIG

#: The reference (block 4, slow) is exactly 2x slower than anything else from n = 300 on and
#: as fast as anything else below; the time grows with n only.
PAIRED_KERNEL = """
SLOW_FROM = 300

def paired(row):
    base = row["n"] / 1000.0 + 0.01
    if row["block"] == 4 and row["variant"] == "slow" and row["n"] >= SLOW_FROM:
        return 2.0 * base
    return base

def expert(inputs):
    return {"block": 4, "variant": "slow"}
"""
REFERENCE = {"block": 4, "variant": "slow"}


def paired_time(n: int, block: int, variant: str) -> float:
    base = n / 1000.0 + 0.01
    return 2.0 * base if (block, variant) == (4, "slow") and n >= 300 else base


def make_campaign(folder: Path, *, budget: int = 80) -> Campaign:
    """A tuned toy campaign on the paired kernel (its module must be importable from
    ``folder / "kernel"``, see :func:`kernel_on_path`)."""
    text = TOY_CONFIG.format(function="paired", method="ga_adaptive", budget=budget, batch=20)
    text = text.replace("toy_kernel:", "validate_kernel:")
    path = folder / "paired.toml"
    path.write_text(text)
    campaign = Campaign.create_or_resume(parse_config(text, path=path), folder / "campaign")
    campaign.run()
    return campaign


def kernel_on_path(folder: Path) -> Iterator[None]:
    """Write the paired kernel module and put it on ``sys.path`` while the generator runs."""
    kernel = folder / "kernel"
    kernel.mkdir(parents=True, exist_ok=True)
    (kernel / "validate_kernel.py").write_text(textwrap.dedent(PAIRED_KERNEL))
    sys.modules.pop("validate_kernel", None)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(kernel))
        yield
    sys.modules.pop("validate_kernel", None)


def copied_campaign(tuned: Path, folder: Path) -> Campaign:
    """The campaign :func:`make_campaign` tuned in ``tuned``, copied into ``folder`` (its
    configuration beside it) and opened for writing there; the kernel must be importable."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tuned / "paired.toml", folder / "paired.toml")
    shutil.copytree(tuned / "campaign", folder / "campaign")
    path = folder / "paired.toml"
    return Campaign.create_or_resume(parse_config(path.read_text(), path=path), folder / "campaign")
