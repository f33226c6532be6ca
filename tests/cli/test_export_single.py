"""``mlkaps-gpu export --targets`` on campaigns that each measured one architecture: a categorical
input with one value is a constant of its target, not a conflict."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign, parse_config
from mlkaps_gpu.cli import main
from mlkaps_gpu.codegen import CompiledHeader, compile_check, target_macro

KERNEL = """
import math

def cost(row):
    # the best block is sqrt(n) on A, 4 sqrt(n) on B
    scale = 1.0 if row["gpu"] == "A" else 4.0
    return math.log(row["block"] / (scale * math.sqrt(row["n"]))) ** 2 + row["n"] / 1000.0
"""

CONFIG = """\
[campaign]
name = "{gpu}"
seed = 2

[kernel]
executor = "python"
function = "one_gpu_kernel:cost"

[inputs]
gpu = {{ type = "categorical", values = ["{gpu}"] }}
n = {{ type = "int", range = [16, 4096], log = true }}

[design]
block = {{ type = "int", values = [4, 8, 16, 32, 64, 128, 256] }}

[sampling]
budget = 60
batch_size = 20

[optimization]
grid = {{ n = 16 }}

[trees]
prefix = "one"
verify_inputs = 300
"""
STRICT_C = ["gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]
SIZES = [16, 40, 100, 300, 1000, 4096]


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Campaign]]:
    folder = tmp_path_factory.mktemp("one_gpu")
    (folder / "one_gpu_kernel.py").write_text(textwrap.dedent(KERNEL))
    runs = []
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(folder))
        sys.modules.pop("one_gpu_kernel", None)
        for gpu in ("A", "B"):
            path = folder / f"{gpu}.toml"
            path.write_text(CONFIG.format(gpu=gpu))
            campaign = Campaign.create_or_resume(
                parse_config(path.read_text(), path=path), folder / f"run_{gpu}"
            )
            campaign.run()
            runs.append(campaign)
        yield runs
    sys.modules.pop("one_gpu_kernel", None)


def _own_answers(campaign: Campaign, gpu: str, build: Path) -> list[int]:
    compiled = CompiledHeader(
        campaign.load_selector(), campaign.header_path.read_text(), prefix="one", build_dir=build
    )
    return compiled(pd.DataFrame({"gpu": [gpu] * len(SIZES), "n": SIZES}))["block"].tolist()


def _program_answers(header: Path, macro: str, folder: Path) -> list[int]:
    folder.mkdir()
    source = folder / "main.c"
    calls = "\n".join(f'    printf("%d\\n", (int)multi_select({n}).block);' for n in SIZES)
    source.write_text(
        f'#include <stdio.h>\n#include "{header}"\nint main(void)\n{{\n{calls}\n    return 0;\n}}\n'
    )
    binary = folder / "main"
    subprocess.run([*STRICT_C, f"-D{macro}", str(source), "-o", str(binary), "-lm"], check=True)
    output = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    return [int(line) for line in output.split()]


@pytest.mark.compiler
def test_two_single_architecture_campaigns_export_to_one_header(
    campaigns: list[Campaign], tmp_path: Path
) -> None:
    out = tmp_path / "multi.h"
    directories = [str(c.directory) for c in campaigns]
    command = ["export", "--targets", *directories, "--prefix", "multi", "--out", str(out)]
    assert main(command) == 0
    header = out.read_text()
    # gpu holds one value per target: the common select takes n only
    assert "multi_select(long long n)" in header
    assert "multi_select_target(const char *name, long long n, multi_config *out)" in header
    build = tmp_path / "build"
    expected = {gpu: _own_answers(c, gpu, build) for gpu, c in zip("AB", campaigns, strict=True)}
    assert expected["A"] != expected["B"], "the two architectures should answer differently"
    for gpu in ("A", "B"):
        macro = target_macro(gpu)
        compile_check(header, [*STRICT_C, f"-D{macro}"], workdir=tmp_path)
        assert _program_answers(out, macro, tmp_path / f"prog_{gpu}") == expected[gpu]


@pytest.mark.compiler
def test_two_replay_campaigns_of_one_gpu_each(tmp_path: Path) -> None:
    root = os.environ.get("MLKAPS_GPU_DATA")
    if not root or not (Path(root) / "convolution_6gpu" / "A100.json.gz").is_file():
        pytest.skip("MLKAPS_GPU_DATA is not set to the replay data")
    config = (Path(__file__).parents[2] / "experiments/configs/convolution_replay.toml").read_text()
    head, _, tail = _split_files(config)
    directories = []
    for gpu in ("A100", "W6600"):
        data = f'"${{MLKAPS_GPU_DATA}}/convolution_6gpu/{gpu}.json.gz"'
        text = head + f"files = {{ gpu = {{ {gpu} = {data} }} }}\n" + tail
        text = text.replace("budget = 300", "budget = 60").replace(
            "verify_inputs = 2000", "verify_inputs = 200"
        )
        path = tmp_path / f"{gpu}.toml"
        path.write_text(text)
        assert main(["-q", "tune", str(path), "--out", str(tmp_path / gpu)]) == 0
        directories.append(str(tmp_path / gpu))
    out = tmp_path / "conv.h"
    assert main(["export", "--targets", *directories, "--out", str(out)]) == 0
    header = out.read_text()
    for gpu in ("A100", "W6600"):
        assert target_macro(gpu) in header
        compile_check(header, [*STRICT_C, f"-D{target_macro(gpu)}"], workdir=tmp_path)


def _split_files(config: str) -> tuple[str, str, str]:
    lines = config.splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if line.startswith("files ="))
    return "".join(lines[:index]), lines[index], "".join(lines[index + 1 :])
