"""Issue 40: a campaign directory is data. A crafted ``selector.pkl``, crafted shared objects and
a crafted header (each of which would create a marker file when loaded or compiled) are never
loaded; every command answers from the data or refuses with a clear message; an old campaign
whose trees are a pickle is rebuilt only on ``tune --force``; a finished replay campaign is read
from its directory alone once its data files moved; ``tune(remeasure=...)`` in Python."""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import pickle
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import mlkaps_gpu
from mlkaps_gpu.campaign import Campaign, CampaignError, parse_config
from mlkaps_gpu.cli import main
from mlkaps_gpu.surrogate import _compiled as forest_engine
from tests.hostile.user import KERNELS, Folder, assert_clean, assert_refused, cli

pytestmark = pytest.mark.compiler

BUDGET = 20
VALIDATE = ["--reference", "block=8", "--grid", "4", "--repeats", "2"]
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


class _Marker:
    """Unpickled, opens (creates) the marker file: what a pickle running code would do."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.path), "w"))


def _evil_library(target: Path, marker: Path) -> None:
    """A shared object whose constructor creates ``marker`` when it is loaded."""
    source = target.with_suffix(".c")
    source.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void mark(void) {\n"
        f'    FILE *f = fopen("{marker}", "w");\n'
        "    if (f) fclose(f);\n"
        "}\n"
        "void PyInit_x(void) {}\n"
    )
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(target), str(source)],
        check=True,
        capture_output=True,
    )
    source.unlink()


def _record(out: Path, name: str) -> None:
    """Write the file's checksum into campaign.json, as an attacker editing the directory can."""
    meta = json.loads((out / "campaign.json").read_text())
    meta["files"][name] = hashlib.sha256((out / name).read_bytes()).hexdigest()
    (out / "campaign.json").write_text(json.dumps(meta))


@pytest.fixture(scope="module")
def _pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("directory_is_data")
    folder = Folder(base / "user")
    folder.path.mkdir()
    shutil.copyfile(KERNELS, folder.path / "kernels.py")
    config = folder.config(budget=BUDGET, batch=10)
    assert_clean(cli("tune", config, "--out", folder.path / "run", cwd=folder.path))
    pristine = base / "pristine"
    shutil.copytree(folder.path, pristine)
    return folder.path, pristine


@pytest.fixture
def finished(
    _pristine: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Folder, Path, Path, Path]:
    """(folder, config, campaign directory, marker): a finished campaign of its own, at the
    path it was tuned at, and an empty user cache (nothing compiled is found there)."""
    path, pristine = _pristine
    shutil.rmtree(path)
    shutil.copytree(pristine, path)
    monkeypatch.setenv("MLKAPS_GPU_CACHE", str(tmp_path / "user-cache"))
    return Folder(path), path / "campaign.toml", path / "run", tmp_path / "MARKER"


def _plant(out: Path, marker: Path) -> None:
    """A crafted selector.pkl (with its checksum recorded) and crafted shared objects where
    mlkaps_gpu once looked for its compiled helpers, with the manifest that pointed at them."""
    (out / "selector.pkl").write_bytes(pickle.dumps(_Marker(marker)))
    _record(out, "selector.pkl")
    build, models = out / "build", out / "models"
    build.mkdir(exist_ok=True)
    header = (out / "hostile.h").read_bytes()
    _evil_library(build / f"_mlkaps_header_0123456789abcdef{SUFFIX}", marker)
    (build / "select.json").write_text(
        json.dumps(
            {
                "header_sha256": hashlib.sha256(header).hexdigest(),
                "module": "_mlkaps_header_0123456789abcdef",
                "module_file": f"_mlkaps_header_0123456789abcdef{SUFFIX}",
                "function": "hostile_python_batch",
                "inputs": [{"name": "n", "kind": "int"}],
                "design": [{"name": "block", "kind": "int"}],
            }
        )
    )
    _evil_library(models / f"{forest_engine._MODULE}{SUFFIX}", marker)
    _evil_library(models / f"_mlkaps_forest_000000000000{SUFFIX}", marker)


def _every_command(folder: Folder, out: Path, tmp_path: Path) -> dict[str, object]:
    table = tmp_path / "inputs.csv"
    table.write_text("n\n16\n100\n4096\n")
    return {
        "select": cli("select", out, "n=100", cwd=folder.path),
        "select --csv": cli("select", out, "--csv", table, cwd=folder.path),
        "report": cli("report", out, "--out", tmp_path / "report.html", cwd=folder.path),
        "export": cli("export", "--targets", out, "--out", tmp_path / "x.h", cwd=folder.path),
        "validate": cli("validate", out, *VALIDATE, cwd=folder.path),
    }


@pytest.mark.integration
def test_crafted_pickle_and_shared_objects_are_never_loaded(
    finished: tuple[Folder, Path, Path, Path], tmp_path: Path
) -> None:
    folder, _, out, marker = finished
    _plant(out, marker)
    for name, result in _every_command(folder, out, tmp_path).items():
        assert_clean(result)  # type: ignore[arg-type]
        assert not marker.exists(), f"{name} ran code from the campaign directory"
    selector = Campaign.open(out).load_selector()
    assert not marker.exists()
    answer = json.loads(cli("select", out, "n=100", cwd=folder.path).stdout)
    assert answer == {"block": int(selector.select(pd.DataFrame({"n": [100]}))["block"][0])}
    # the crafted files were left alone: nothing was built or loaded beside the campaign
    assert sorted(p.name for p in (out / "models").glob("*.so")) == sorted(
        [f"{forest_engine._MODULE}{SUFFIX}", f"_mlkaps_forest_000000000000{SUFFIX}"]
    )


@pytest.mark.integration
def test_a_crafted_header_is_never_compiled(
    finished: tuple[Folder, Path, Path, Path], tmp_path: Path
) -> None:
    folder, _, out, marker = finished
    header = out / "hostile.h"
    header.write_text(
        header.read_text()
        + f'\n#include <stdio.h>\n__attribute__((constructor)) static void m(void) {{ fclose(fopen("{marker}", "w")); }}\n'  # noqa: E501
    )
    _record(out, "hostile.h")  # its checksum updated: it passes the accident check
    for command in (["select", out, "n=100"], ["validate", out, *VALIDATE]):
        result = cli(*command, cwd=folder.path)
        assert_refused(result, "hostile.h", "differs from the header the trees", "--force")
    assert not marker.exists()


@pytest.mark.integration
def test_an_old_campaign_with_a_pickle_is_refused_then_rebuilt_with_force(
    finished: tuple[Folder, Path, Path, Path], tmp_path: Path
) -> None:
    folder, config, out, marker = finished
    _plant(out, marker)
    (out / "selector.json").unlink()
    meta = json.loads((out / "campaign.json").read_text())
    del meta["files"]["selector.json"]
    (out / "campaign.json").write_text(json.dumps(meta))
    results = _every_command(folder, out, tmp_path)
    for name in ("select", "select --csv", "export", "validate"):
        assert_refused(results[name], "selector.pkl", "pickle", "--force")  # type: ignore[arg-type]
    report = results["report"]
    assert report.returncode in (0, 2) and "Traceback" not in report.stderr  # type: ignore[attr-defined]
    with pytest.raises(CampaignError, match="never loaded"):
        Campaign.open(out).load_selector()
    assert_refused(cli("tune", config, "--out", out, cwd=folder.path), "selector.pkl", "--force")
    assert not marker.exists()
    calls = folder.calls
    assert_clean(cli("tune", config, "--out", out, "--force", cwd=folder.path))
    assert folder.calls == calls  # rebuilt from the stored measurements
    assert (out / "selector.json").is_file() and not (out / "selector.pkl").exists()
    assert_clean(cli("select", out, "n=100", cwd=folder.path))
    assert not marker.exists()


# ----------------------------------------------------------------- from the directory alone
def _replay_case(folder: Path) -> str:
    files = []
    for value, shift in (("g0", 0), ("g1", 2)):
        rows = [
            {"a": a, "variant": v, "objective": 1.0 + (a - 3 - shift) ** 2 + (v == "y") * 0.5}
            for a in range(1, 9)
            for v in ("x", "y")
        ]
        path = folder / "data" / f"{value}.csv"
        path.parent.mkdir(exist_ok=True)
        pd.DataFrame(rows).to_csv(path, index=False)
        files.append(f'{value} = "data/{value}.csv"')
    return f"""
[campaign]
name = "moved"
seed = 0

[kernel]
executor = "replay"
format = "csv"
objective = "time"
design_columns = ["a", "variant"]
files = {{ gpu = {{ {", ".join(files)} }} }}

[sampling]
method = "lhs"
budget = 24

[trees]
prefix = "moved"
verify_inputs = 200
"""


def test_a_replay_campaign_is_read_after_its_data_files_moved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLKAPS_GPU_CACHE", str(tmp_path / "user-cache"))
    text = _replay_case(tmp_path)
    config = parse_config(text, path=tmp_path / "case.toml", label="case.toml")
    out = tmp_path / "run"
    with Campaign.create_or_resume(config, out) as campaign:
        campaign.run()
        expected = campaign.load_selector().select(pd.DataFrame({"gpu": ["g0", "g1"]}))
    (tmp_path / "data").rename(tmp_path / "elsewhere")
    capsys.readouterr()
    assert main(["select", str(out), "gpu=g1"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer == {"a": int(expected["a"][1]), "variant": expected["variant"][1]}
    assert main(["report", str(out), "--out", str(tmp_path / "report.html")]) == 0
    assert "moved" in (tmp_path / "report.html").read_text()
    assert main(["export", "--targets", str(out), "--out", str(tmp_path / "all.h")]) == 0
    assert "moved_select" in (tmp_path / "all.h").read_text()
    capsys.readouterr()
    # the commands that must measure say what they need
    assert main(["validate", str(out), "--reference", "a=1,variant=x", "--grid", "2"]) == 2
    error = capsys.readouterr().err
    assert "replay file not found" in error and "measures" in error
    assert main(["merge", str(out), "--expert", "a=1,variant=x", "--grid", "2"]) == 2
    error = capsys.readouterr().err
    assert "replay file not found" in error and "measures" in error
    # nothing was measured, nothing written where a reader would take it for a result
    assert not (out / "validation").exists() and not (out / "merge").exists()


# --------------------------------------------------------------------- tune(remeasure=...)
def _rows(out: Path) -> int:
    with sqlite3.connect(f"file:{out / 'samples.sqlite'}?mode=ro", uri=True) as connection:
        return int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])


def test_tune_remeasure_in_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLKAPS_GPU_CACHE", str(tmp_path / "user-cache"))
    text = _replay_case(tmp_path)
    (tmp_path / "case.toml").write_text(text)
    out = tmp_path / "run"
    mlkaps_gpu.tune(tmp_path / "case.toml", out).close()
    (out / "samples.sqlite").write_bytes(b"not a database")
    with pytest.raises(CampaignError, match="--remeasure"):
        mlkaps_gpu.tune(tmp_path / "case.toml", out)
    campaign = mlkaps_gpu.tune(tmp_path / "case.toml", out, remeasure=True)
    campaign.close()
    assert _rows(out) == 24
    assert list(out.glob("samples.sqlite.damaged-*"))
    assert campaign.done("trees")
