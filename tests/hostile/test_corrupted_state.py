"""Class 7: a truncated, emptied or deleted store, a corrupted campaign.json, selector or model
file, a deleted config.toml and a creation killed half way. Each is found before anything is
measured or overwritten: exit status 2 with what is wrong and what to do, nothing lost, and
measurements taken again only when asked (--remeasure)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.hostile.user import (
    KERNELS,
    Folder,
    assert_clean,
    assert_refused,
    cli,
    file_digest,
    store_rows,
)

pytestmark = pytest.mark.integration

BUDGET = 20
VALIDATE = ["--reference", "block=8", "--grid", "4", "--repeats", "2"]


@pytest.fixture(scope="module")
def _pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One finished campaign per module, tuned once: (the user's folder, a copy of it as it
    was when the campaign finished)."""
    base = tmp_path_factory.mktemp("corrupted")
    folder = Folder(base / "user")
    folder.path.mkdir()
    shutil.copyfile(KERNELS, folder.path / "kernels.py")
    config = folder.config(budget=BUDGET, batch=10)
    assert_clean(cli("tune", config, "--out", folder.path / "run", cwd=folder.path))
    assert len(store_rows(folder.path / "run")) == BUDGET
    pristine = base / "pristine"
    shutil.copytree(folder.path, pristine)
    return folder.path, pristine


@pytest.fixture
def finished(_pristine: tuple[Path, Path]) -> tuple[Folder, Path, Path]:
    """A finished campaign: (folder, config, directory), restored from the module's copy at the
    path where it was tuned (campaign.json records the user's folder), so that every test
    damages a campaign of its own without tuning one."""
    path, pristine = _pristine
    shutil.rmtree(path)
    shutil.copytree(pristine, path)
    return Folder(path), path / "campaign.toml", path / "run"


def _store(out: Path) -> Path:
    return out / "samples.sqlite"


@pytest.mark.parametrize(
    ("damage", "fragment"),
    [
        ("truncate", "samples.sqlite is damaged"),
        ("garbage", "samples.sqlite is damaged"),
        ("empty", f"samples.sqlite holds 0 measurements, but campaign.json records {BUDGET}"),
        ("delete", "samples.sqlite is missing"),
    ],
)
def test_a_damaged_store_is_refused_then_remeasured_only_when_asked(
    finished: tuple[Folder, Path, Path], damage: str, fragment: str
) -> None:
    folder, config, out = finished
    store = _store(out)
    data = store.read_bytes()
    if damage == "truncate":
        store.write_bytes(data[: len(data) // 3])
    elif damage == "garbage":
        store.write_bytes(b"this is not a database" * 200)
    elif damage == "empty":
        store.write_bytes(b"")
    else:
        store.unlink()
    before = file_digest(store) if store.exists() else None
    calls = folder.calls
    for command in (["tune", config, "--out", out], ["validate", out, *VALIDATE]):
        result = cli(*command, cwd=folder.path)
        assert_refused(result, fragment)
        assert "--remeasure" in result.stderr
    assert (file_digest(store) if store.exists() else None) == before  # left as found
    assert folder.calls == calls  # nothing measured
    assert_clean(cli("tune", config, "--out", out, "--remeasure", cwd=folder.path))
    assert len(store_rows(out)) == BUDGET and folder.calls == calls + BUDGET
    if damage != "delete":
        (aside,) = [
            p for p in out.glob("samples.sqlite.damaged-*") if not p.name.endswith(("-wal", "-shm"))
        ]
        assert file_digest(aside) == before  # the damaged file is kept, not deleted


def test_a_corrupted_manifest_is_refused_and_rebuilt_with_force(
    finished: tuple[Folder, Path, Path],
) -> None:
    folder, config, out = finished
    rows = store_rows(out)
    (out / "campaign.json").write_text('{"config_sha256": "0", "stages": [')
    calls = folder.calls
    for command in (
        ["tune", config, "--out", out],
        ["select", out, "n=100"],
        ["validate", out, *VALIDATE],
    ):
        result = cli(*command, cwd=folder.path)
        assert_refused(result, "campaign.json is damaged", "--force")
    assert_clean(cli("tune", config, "--out", out, "--force", cwd=folder.path))
    assert store_rows(out) == rows and folder.calls == calls  # measurements kept, none redone
    assert_clean(cli("select", out, "n=100", cwd=folder.path))


@pytest.mark.parametrize(
    "name", ["selector.json", "models/time.txt", "optima.csv", "hostile.h", "verification.json"]
)
def test_a_corrupted_output_is_refused_then_recomputed_only_with_force(
    finished: tuple[Folder, Path, Path], name: str
) -> None:
    folder, config, out = finished
    rows = store_rows(out)
    path = out / name
    path.write_bytes(path.read_bytes()[: max(1, len(path.read_bytes()) // 2)] + b"\x00garbage")
    calls = folder.calls
    # every command that reads the campaign names the damaged file, before measuring anything
    for command in (["validate", out, *VALIDATE], ["select", out, "n=100"], ["report", out]):
        result = cli(*command, cwd=folder.path)
        assert_refused(result, name, "changed since it was written", "--force")
    assert folder.calls == calls
    # tune does not rebuild it unless asked
    result = cli("tune", config, "--out", out, cwd=folder.path)
    assert_refused(result, name, "changed since it was written", "--force")
    result = cli("--log-level", "WARNING", "tune", config, "--out", out, "--force", cwd=folder.path)
    assert_clean(result)
    assert name in result.stderr and "redone from the measurements" in result.stderr
    assert store_rows(out) == rows and folder.calls == calls
    assert_clean(cli("select", out, "n=100", cwd=folder.path))


def test_a_deleted_config_copy_is_reported(finished: tuple[Folder, Path, Path]) -> None:
    folder, _, out = finished
    (out / "config.toml").unlink()
    assert_refused(cli("validate", out, *VALIDATE, cwd=folder.path), "config.toml cannot be read")


def test_a_creation_killed_half_way_is_taken_up_again(folder: Folder) -> None:
    config = folder.config(budget=BUDGET, batch=10)
    out = folder.path / "run"
    out.mkdir()
    (out / "config.toml").write_text(config.read_text())  # what creation writes first
    (out / ".lock").write_text("99999999\n")
    (out / "environment.json.tmp").write_text("{")
    assert_clean(cli("tune", config, "--out", out, cwd=folder.path))
    assert len(store_rows(out)) == BUDGET


def test_a_foreign_directory_is_never_taken(folder: Folder) -> None:
    config = folder.config(budget=BUDGET)
    out = folder.path / "run"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    assert_refused(cli("tune", config, "--out", out, cwd=folder.path), "is not a campaign")
    assert (out / "thesis.tex").read_text() == "years of work" and folder.calls == 0
    shutil.rmtree(out)
