"""Damaged or missing campaign state, found before anything is read, measured or overwritten.

``campaign.json`` (the manifest) records, besides the configuration digest and the stages done,
the number of measurements the store held after the last batch (``samples``) and the SHA-256 of
every file a finished stage wrote (``files``). Before a campaign is resumed:

* an unreadable ``campaign.json`` is an error (``--force`` rebuilds it from the configuration
  given: measurements are kept, every later stage is redone);
* a missing ``samples.sqlite``, one that fails SQLite's ``PRAGMA integrity_check``, or one that
  holds fewer measurements than recorded is an error: nothing is measured again unless asked
  (``--remeasure`` moves the damaged file aside and starts sampling from scratch);
* a missing or changed output of a finished stage (models, optima, selector, header) is
  recomputed from the measurements, with a warning (nothing measured is lost).

A directory holding only what campaign creation writes before ``campaign.json`` (a creation
killed half way) is taken as not yet created.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from mlkaps_gpu.campaign._errors import CampaignError

META = "campaign.json"
STORE = "samples.sqlite"
#: What campaign creation writes before campaign.json (the lock file, the empty store...).
CREATION_FILES = frozenset(
    {".lock", "config.toml", "config.toml.tmp", "environment.json", "environment.json.tmp",
     "campaign.json.tmp", STORE, f"{STORE}-wal", f"{STORE}-shm", f"{STORE}-journal"}
)  # fmt: skip
_REQUIRED_KEYS = ("config_sha256", "stages")


def read_meta(directory: Path) -> dict[str, Any]:
    """The manifest of a campaign directory.

    Raises:
        CampaignError: it cannot be read or is not a manifest (saying what to do).
    """
    path = directory / META
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CampaignError(f"{directory}: not a campaign directory (no {META})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CampaignError(_damaged_meta(directory, f"unreadable ({_one_line(error)})")) from None
    if not isinstance(meta, dict) or any(key not in meta for key in _REQUIRED_KEYS):
        raise CampaignError(_damaged_meta(directory, "not a campaign manifest"))
    if not isinstance(meta["stages"], list):
        raise CampaignError(_damaged_meta(directory, "'stages' is not a list"))
    return meta


def _damaged_meta(directory: Path, problem: str) -> str:
    return (
        f"{directory}: {META} is damaged ({problem}); restore it, or run the same tune command "
        "with --force to rebuild it from the configuration given (measurements are kept, the "
        "later stages are redone)"
    )


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def interrupted_creation(directory: Path) -> bool:
    """Whether a directory without a manifest holds only what creation writes first (and an
    empty store, if any): a creation killed half way, to be done again."""
    if not directory.is_dir() or (directory / META).exists():
        return False
    if not all(entry.name in CREATION_FILES for entry in directory.iterdir()):
        return False
    store = directory / STORE
    return not store.exists() or _rows(store) == 0


def _rows(path: Path) -> int | None:
    """Rows of a store's samples table (0 without the table; None: unreadable)."""
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            tables = connection.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name='samples'"
            ).fetchall()
            if not tables:
                return 0
            return int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
        finally:
            connection.close()
    except sqlite3.DatabaseError:
        return None


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def output_digests(directory: Path, files: list[str]) -> dict[str, str]:
    """SHA-256 of the given files (relative paths) that exist."""
    return {name: file_digest(directory / name) for name in files if (directory / name).is_file()}


def changed_outputs(directory: Path, meta: dict[str, Any]) -> dict[str, str]:
    """Recorded outputs that are missing or differ from their digest: ``{file: problem}``."""
    problems: dict[str, str] = {}
    recorded = meta.get("files", {})
    if not isinstance(recorded, dict):
        return {META: "'files' is not a table"}
    for name, digest in sorted(recorded.items()):
        path = directory / name
        if not path.is_file():
            problems[name] = "missing"
        elif file_digest(path) != digest:
            problems[name] = "changed since it was written (checksum differs)"
    return problems


def store_problem(directory: Path, rows: int | None, integrity: str | None) -> str | None:
    """What is wrong with a campaign's store (None: nothing).

    Args:
        directory: the campaign directory.
        rows: measurements the store holds (None: it could not be read).
        integrity: the result of the store's integrity check (None: passed).
    """
    recorded = _recorded_samples(directory)
    if integrity is not None:
        return f"{STORE} is damaged ({integrity})"
    if rows is None:
        return f"{STORE} cannot be read"
    if recorded is not None and rows < recorded:
        return f"{STORE} holds {rows} measurements, but {META} records {recorded}"
    return None


def _recorded_samples(directory: Path) -> int | None:
    try:
        value = json.loads((directory / META).read_text(encoding="utf-8")).get("samples")
    except (OSError, ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int) else None


def set_aside(directory: Path) -> Path:
    """Move a damaged store (and its WAL files) aside; returns its new name. Nothing is
    deleted: the user may still recover measurements from it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = directory / f"{STORE}.damaged-{stamp}"
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = directory / f"{STORE}{suffix}"
        if path.exists():
            path.rename(directory / f"{target.name}{suffix}")
    return target


def remeasure_hint(directory: Path, problem: str) -> str:
    return (
        f"{directory}: {problem}; restore it from a backup, or run the same tune command with "
        "--remeasure to move it aside and measure again from scratch"
    )
