"""Every code block of the README and of docs/ is checked: Python compiles, TOML parses and
complete configurations load and pass ``mlkaps-gpu check``, every ``mlkaps-gpu`` command parses
with the real argument parser; and the site builds in mkdocs' strict mode."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from mlkaps_gpu.cli._main import build_parser

from ._pages import (
    ROOT,
    Block,
    all_blocks,
    commands,
    inside,
    page_files,
    split_environment,
    write_files,
)

PYTHON_BLOCKS = all_blocks("python", "py")
TOML_BLOCKS = all_blocks("toml")
SHELL_BLOCKS = all_blocks("bash", "sh", "shell", "console")
#: Pages whose TOML configurations tests/campaign/test_config_model.py already runs through
#: ``check`` (the README, with a stand-in for its ``mypackage.kernels``, and docs/*.md).
CHECKED_ELSEWHERE = {ROOT / "README.md", *(ROOT / "docs").glob("*.md")}


def _ids(found: list[Block]) -> list[str]:
    return [block.label for block in found]


def _config_blocks() -> list[Block]:
    return [
        b
        for b in TOML_BLOCKS
        if b.page not in CHECKED_ELSEWHERE
        and b.first_line != "# fragment"
        and "kernel" in _parsed_or_empty(b.text)
    ]


def _parsed_or_empty(text: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {"kernel": None}  # still a configuration: test_toml_blocks_parse reports it


def test_the_pages_have_blocks() -> None:
    assert PYTHON_BLOCKS and TOML_BLOCKS and SHELL_BLOCKS
    assert any(b.page.name == "index.md" for b in SHELL_BLOCKS)


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=_ids(PYTHON_BLOCKS))
def test_python_blocks_compile(block: Block) -> None:
    compile(block.text, block.label, "exec")


@pytest.mark.parametrize("block", TOML_BLOCKS, ids=_ids(TOML_BLOCKS))
def test_toml_blocks_parse(block: Block) -> None:
    """A TOML block is TOML; it is either a complete configuration (with a [kernel] section) or
    marked as a fragment (first line ``# fragment``, no [kernel])."""
    try:
        data = tomllib.loads(block.text)
    except tomllib.TOMLDecodeError as error:
        pytest.fail(f"{block.label}: not TOML ({error}); a partial one starts with '# fragment'")
    if block.first_line == "# fragment":
        assert "kernel" not in data, f"{block.label}: a fragment with [kernel] is a configuration"
    else:
        assert "kernel" in data, f"{block.label}: no [kernel]: start it with '# fragment'"


def _needs(block: Block) -> str | None:
    """Why this configuration cannot be checked here, or None."""
    if "${MLKAPS_GPU_DATA}" in block.text and not os.environ.get("MLKAPS_GPU_DATA"):
        return "needs the replay data (MLKAPS_GPU_DATA)"
    return None


CONFIG_BLOCKS = _config_blocks()


@pytest.mark.parametrize("block", CONFIG_BLOCKS, ids=_ids(CONFIG_BLOCKS))
def test_complete_configs_pass_check(
    block: Block, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A configuration with a [kernel] section loads and passes ``mlkaps-gpu check`` (with the
    files its page defines beside it: a Python kernel's module, a C source)."""
    reason = _needs(block)
    if reason:
        pytest.skip(reason)
    import mlkaps_gpu

    write_files(block.page, tmp_path)
    path = tmp_path / (block.file_name or "campaign.toml")
    path.write_text(block.text, encoding="utf-8")
    config = mlkaps_gpu.load_config(path)
    assert config.kernel.executor
    uses_cupy = config.kernel.executor == "cupy" or any(
        "import cupy" in text for text in page_files(block.page).values()
    )
    if uses_cupy and importlib.util.find_spec("cupy") is None:
        pytest.skip("loaded; check builds the CuPy executor or imports a CuPy kernel: no CuPy")
    from mlkaps_gpu.cli import main

    with inside(tmp_path, ["."], {}):  # the kernel module beside the configuration
        code = main(["check", str(path)])
    captured = capsys.readouterr()
    assert code == 0, f"{block.label}: mlkaps-gpu check failed: {captured.err}"
    assert captured.out.startswith("OK "), captured.out


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_ids(SHELL_BLOCKS))
def test_cli_commands_parse(block: Block) -> None:
    """Every ``mlkaps-gpu`` command of a shell block names an existing subcommand and flags."""
    parser = build_parser()
    for argv in commands(block):
        _, command = split_environment(argv)
        if not command or command[0] != "mlkaps-gpu":
            continue
        try:
            parser.parse_args(command[1:])
        except SystemExit as stop:
            assert stop.code == 0, f"{block.label}: {' '.join(argv)} does not parse"


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_ids(SHELL_BLOCKS))
def test_experiment_commands_name_their_flags(block: Block) -> None:
    """``python experiments/X.py --flag`` commands: the script exists and defines the flags."""
    for argv in commands(block):
        _, command = split_environment(argv)
        if len(command) < 2 or command[0] not in {"python", "python3"}:
            continue
        if not command[1].startswith("experiments/"):
            continue
        script = ROOT / command[1]
        assert script.is_file(), f"{block.label}: no {command[1]}"
        source = script.read_text(encoding="utf-8")
        for flag in (a.split("=")[0] for a in command[2:] if a.startswith("--")):
            assert f'"{flag}"' in source, f"{block.label}: {command[1]} has no {flag}"


def test_mkdocs_nav_lists_every_page() -> None:
    """The nav names existing pages, and every page (strict mode only notes a page left out)."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    named = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", text, re.MULTILINE))
    for page in named:
        assert (ROOT / "docs" / page).is_file(), f"mkdocs.yml names a missing page {page}"
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages <= named, f"pages missing from the mkdocs.yml nav: {sorted(pages - named)}"


@pytest.mark.integration
def test_docs_build_in_strict_mode(tmp_path: Path) -> None:
    """``mkdocs build --strict``: no broken link, no missing page, no docstring warning in the
    API reference (as .ci/run builds it)."""
    if shutil.which("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("mkdocs and mkdocstrings are not installed (pip install -e '.[docs]')")
    done = subprocess.run(
        ["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("mlkaps_gpu.tune", "mlkaps_gpu.Campaign", "mlkaps_gpu.sampling.Sampler"):
        assert f'id="{name}"' in api, f"the API reference lacks {name}"
