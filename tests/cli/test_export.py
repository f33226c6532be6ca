"""``mlkaps-gpu export``: two campaigns (architectures) in one header, each answering like its
own campaign header, by name (cffi) and by compile-time macro (a compiled program)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.campaign._campaign import CampaignError
from mlkaps_gpu.campaign._config import load_config
from mlkaps_gpu.cli._export import add_parser, export_header, run
from mlkaps_gpu.codegen import boundary_inputs, compile_check, target_macro
from mlkaps_gpu.codegen._compiled import CompiledHeader
from mlkaps_gpu.testing import write_config, write_toy_kernel
from tests.codegen.test_multi_target import (
    by_name,
    codes_of,
    finite_rows,
    program_answers,
    ranked_by_name,
)
from tests.toy import importable

SHIFTED_KERNEL = '''
import math

def model(row):
    """Like toy_kernel.model, but the best block is 4 sqrt(n) and 'slow' is faster."""
    n, block, variant = row["n"], row["block"], row["variant"]
    penalty = 0.3 if variant == "fast" else 0.0
    return math.log(block / (4.0 * math.sqrt(n))) ** 2 + penalty + n / 1000.0
'''
STRICT_C = ["gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]
STRICT_CXX = ["g++", "-std=c++17", "-Wall", "-Wextra", "-pedantic", "-Werror"]


def _tune(config: Path, out: Path) -> Campaign:
    campaign = Campaign.create_or_resume(load_config(config), out)
    campaign.run()
    return campaign


@pytest.fixture(scope="module")
def _kernels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The toy and the shifted kernel modules, importable while the module's tests run."""
    folder = tmp_path_factory.mktemp("export_kernels")
    write_toy_kernel(folder)
    (folder / "toy_shifted.py").write_text(SHIFTED_KERNEL)
    sys.modules.pop("toy_shifted", None)
    with importable(folder):
        yield folder


@pytest.fixture(scope="module")
def toy_campaigns(_kernels: Path) -> list[Campaign]:
    """Two toy campaigns (the second on the shifted kernel), tuned once for the module."""
    first = write_config(_kernels, budget=60, name="a.toml")
    text = first.read_text().replace("verify_inputs = 2000", "verify_inputs = 200")
    first.write_text(text)
    second = _kernels / "b.toml"
    second.write_text(
        text.replace("seed = 3", "seed = 11").replace("toy_kernel:model", "toy_shifted:model")
    )
    return [_tune(first, _kernels / "camp_a"), _tune(second, _kernels / "camp_b")]


def _check_export(campaigns: list[Campaign], names: list[str], tmp_path: Path) -> None:
    prefix = "multi"
    out = tmp_path / "out" / "multi.h"
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["export", "--targets", *(str(c.directory) for c in campaigns), "--names", *names]
        + ["--prefix", prefix, "--out", str(out)]
    )
    assert run(args) == 0
    header = out.read_text()
    for campaign in campaigns:
        assert f"campaign: {campaign.config.name}" in header
        assert "samples_sha256" in header
    selectors = [c.load_selector() for c in campaigns]
    model = selectors[0].model_
    table = boundary_inputs(selectors[0], 300, np.random.default_rng(1))
    build = tmp_path / "build"
    own = [
        CompiledHeader(s, c.header_path.read_text(), prefix=c.config.trees.prefix, build_dir=build)
        for s, c in zip(selectors, campaigns, strict=True)
    ]
    answers = [compiled(table) for compiled in own]
    assert not answers[0].equals(answers[1]), "the two campaigns should answer differently"
    # (b) by name, through cffi, equals each campaign's own header; unknown: the default's
    for name, expected in [*zip(names, answers, strict=True), ("nope", answers[0])]:
        got = by_name(header, model, prefix, name, build)(table)
        assert got.equals(expected), name
    # the ranked configurations by name, through cffi, equal each campaign's own ranking
    assert f" {prefix}_ranked_target(" in header and f" {prefix}_ranked(" in header
    longest = 0
    for name, compiled, selector in zip(names, own, selectors, strict=True):
        got_frames, got_counts = ranked_by_name(header, selector.model_, prefix, name, table)
        frames, counts = compiled.ranked(table)
        assert (got_counts == counts).all(), name
        longest = max(longest, int(counts.max()))
        for rank, (got, expected) in enumerate(zip(got_frames, frames, strict=True)):
            rows = rank < counts
            assert got[rows].reset_index(drop=True).equals(expected[rows].reset_index(drop=True)), (
                name,
                rank,
            )
    # a ranking beyond the first answer was compared where a campaign has one (the toy
    # campaigns; each convolution tree is one leaf, one configuration)
    assert longest >= min(2, max(len(s.model_.ranking.portfolio) for s in selectors))
    # (a) strict builds, with each macro and with none
    for macro in [None, *names]:
        flags = [f"-D{target_macro(macro)}"] if macro else []
        compile_check(header, [*STRICT_C, *flags], workdir=tmp_path)
        compile_check(header, [*STRICT_CXX, *flags], suffix=".cpp", workdir=tmp_path)
        if shutil.which("nvcc"):
            compile_check(header, ["nvcc", "-std=c++17", *flags], suffix=".cu", workdir=tmp_path)
    # (c) the macro picks the target in a compiled program; unknown names return -1
    rows = finite_rows(model, table, size=30)
    for index, macro in [(0, None), *enumerate(names)]:
        flags = [target_macro(macro)] if macro else []
        folder = tmp_path / f"prog_{index}_{macro}"
        folder.mkdir()
        selected, statuses, fallback = program_answers(header, model, prefix, rows, folder, flags)
        assert selected == codes_of(selectors[index], rows)
        assert statuses == [-1] * len(rows)
        assert fallback == codes_of(selectors[0], rows)


@pytest.mark.compiler
def test_export_toy_campaigns(toy_campaigns: list[Campaign], tmp_path: Path) -> None:
    _check_export(toy_campaigns, ["fast", "shifted-B"], tmp_path)


def test_export_refusals(toy_campaigns: list[Campaign], tmp_path: Path, _kernels: Path) -> None:
    directories = [c.directory for c in toy_campaigns]
    with pytest.raises(CampaignError, match="1 name"):
        export_header(directories, tmp_path / "x.h", names=["a"])
    with pytest.raises(CampaignError, match="campaign and directory names repeat|MLKAPS"):
        export_header(directories, tmp_path / "x.h", names=["a", "A"])
    # default names: the campaign names repeat ('toy'), so the directory names are used
    path = export_header(directories, tmp_path / "x.h", default="camp_b")
    assert "MLKAPS_TARGET_CAMP_A" in path.read_text()
    # a campaign with another input range is refused, naming the parameter and the campaign
    wider = tmp_path / "wide.toml"
    wider.write_text((_kernels / "b.toml").read_text().replace("[16, 4096]", "[16, 8192]"))
    other = _tune(wider, tmp_path / "camp_wide")
    with pytest.raises(CampaignError, match=r"camp_wide.*input parameter 'n'"):
        export_header([directories[0], other.directory], tmp_path / "y.h")


REPLAY = Path(__file__).resolve().parents[2] / "experiments" / "configs" / "convolution_replay.toml"


@pytest.mark.compiler
@pytest.mark.slow  # 20 s: the checks of test_export_toy_campaigns, on two real replay campaigns
@pytest.mark.skipif(not os.environ.get("MLKAPS_GPU_DATA"), reason="MLKAPS_GPU_DATA is not set")
def test_export_replay_convolution(tmp_path: Path) -> None:
    text = REPLAY.read_text()
    text = text.replace("budget = 300", "budget = 40").replace(
        "verify_inputs = 2000", "verify_inputs = 200"
    )
    campaigns = []
    for gpu in ("A100", "W6600"):
        config = tmp_path / f"{gpu}.toml"
        config.write_text(
            text.replace('method = "lhs"', f'method = "lhs"\nfixed = {{ gpu = "{gpu}" }}')
        )
        campaigns.append(_tune(config, tmp_path / gpu))
    _check_export(campaigns, ["A100", "W6600"], tmp_path)
