"""A user's own C kernel (``[kernel] source``) kept beside its configuration: the example of
``examples/c_kernel`` copied to a fresh folder is tuned by the ``mlkaps-gpu`` command from
another working directory, without PYTHONPATH, with real compilations; its header is verified
and ``select`` answers from it."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from mlkaps_gpu.campaign import load_config
from tests.docs._pages import mlkaps_gpu_process

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "c_kernel"

pytestmark = [
    pytest.mark.compiler,
    pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler"),
]


@pytest.mark.integration
def test_the_example_tunes_from_another_directory(tmp_path: Path) -> None:
    user = tmp_path / "user"
    shutil.copytree(EXAMPLE, user)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache = tmp_path / "cache"
    config = Path("..") / "user" / "transpose.toml"
    done = mlkaps_gpu_process("--quiet", "tune", config, "--out", "run", cwd=elsewhere, cache=cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    run = elsewhere / "run"
    assert (run / "transpose.h").is_file()
    verification = json.loads((run / "verification.json").read_text())
    assert verification["mismatches"] == 0 and verification["verified_inputs"] > 0
    with sqlite3.connect(run / "samples.sqlite") as connection:
        statuses = dict(connection.execute("SELECT status, COUNT(*) FROM samples GROUP BY status"))
        tiles = {row[0] for row in connection.execute("SELECT DISTINCT tile FROM samples")}
    # every configuration ran and passed the check of arguments.py
    assert set(statuses) == {"ok"} and statuses["ok"] >= 40, statuses
    # one real compilation per tile value (-DTILE=...), none for chunk or threads
    modules = list((cache / "cffi").glob("_mlkaps_*.so"))
    assert len(modules) == len(tiles) >= 2, (modules, tiles)
    answer = mlkaps_gpu_process("select", "run", "m=100", "n=700", cwd=elsewhere, cache=cache)
    assert answer.returncode == 0, answer.stderr
    configuration = json.loads(answer.stdout)
    assert set(configuration) == {"tile", "chunk", "threads"}
    assert configuration["tile"] in {8, 16, 32, 64}


def test_paths_are_relative_to_the_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "user"
    shutil.copytree(EXAMPLE, user)
    monkeypatch.chdir(tmp_path)
    kernel = load_config(user / "transpose.toml").kernel
    assert kernel.source == str(user / "transpose.c")
    assert kernel.builder == f"{user / 'arguments.py'}:build"
    assert kernel.check == f"{user / 'arguments.py'}:check"
    assert kernel.passed_design() == {"tile": "macros", "chunk": "runtime", "threads": "threads"}


def test_the_source_may_name_an_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "user"
    shutil.copytree(EXAMPLE, user)
    config = user / "transpose.toml"
    text = config.read_text()
    config.write_text(text.replace('"transpose.c"', '"${KERNELS}/transpose.c"'))
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (user / "transpose.c").rename(kernels / "transpose.c")
    monkeypatch.setenv("KERNELS", str(kernels))
    assert load_config(config).kernel.source == str(kernels / "transpose.c")
