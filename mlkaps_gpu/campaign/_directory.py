"""The campaign directory: its state (new, resumed, damaged), what a new one holds, how an
existing one is read, and the all-or-nothing writes of its files.

A campaign directory is data: nothing in it is unpickled or run (see ``docs/architecture.md``).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pandas as pd

from mlkaps_gpu import __version__
from mlkaps_gpu._files import write_atomically
from mlkaps_gpu.campaign._config import CampaignConfig, ConfigError, parse_config
from mlkaps_gpu.campaign._environment import capture_environment
from mlkaps_gpu.campaign._errors import CampaignError
from mlkaps_gpu.campaign._integrity import (
    STORE,
    changed_outputs,
    interrupted_creation,
    read_meta,
    remeasure_hint,
    set_aside,
    store_problem,
)
from mlkaps_gpu.campaign._lock import CampaignLock, LockHeldError
from mlkaps_gpu.campaign._readonly import (
    ENVIRONMENT,
    LEGACY_PICKLE,
    META,
    SELECTOR_FILE,
    ReadOnlyCampaign,
)
from mlkaps_gpu.campaign._setup import Setup, prepare
from mlkaps_gpu.campaign._store import SampleStore, StoreError
from mlkaps_gpu.executors import ExternalExecutor
from mlkaps_gpu.space import Space

log = logging.getLogger("mlkaps_gpu")


def target_state(directory: Path, config: CampaignConfig, force: bool) -> str:
    """``"new"`` (nothing there, or a creation killed half way), ``"resume"``, or
    ``"rebuild"`` (a damaged campaign.json under ``force``); an error for anything else."""
    if directory.exists() and not directory.is_dir():
        raise CampaignError(f"{directory}: exists and is not a directory")
    if (directory / META).exists():
        try:
            meta = read_meta(directory)
        except CampaignError:
            if force:
                log.warning("%s: %s is damaged; rebuilding it (--force)", directory, META)
                return "rebuild"
            raise
        if meta.get("config_sha256") != config.digest and not force:
            raise CampaignError(
                f"{directory}: the configuration differs from the one this campaign was "
                "started with (config.toml there); use --force to resume anyway"
            )
        return "resume"
    if directory.exists() and any(directory.iterdir()) and not interrupted_creation(directory):
        raise CampaignError(f"{directory}: exists, is not empty and is not a campaign")
    return "new"


def check_store(directory: Path, remeasure: bool, *, force: bool | None = None) -> None:
    """Refuse a missing or damaged store unless ``remeasure`` (then set it aside and start
    sampling again from an empty store). With ``force`` given (a resumed ``tune``), the
    outputs of finished stages are checked too (:func:`_check_outputs`)."""
    _check_store_file(directory, remeasure)
    if force is not None:
        _check_outputs(directory, force)


def _check_outputs(directory: Path, force: bool) -> None:
    """Refuse, unless ``force``, a finished campaign whose outputs changed or vanished since
    their stage wrote them, or whose trees are an old ``selector.pkl`` (never loaded). With
    ``force`` the stages are redone from the stored measurements (the resume clears them)."""
    meta = read_meta(directory)
    changed = changed_outputs(directory, meta)
    legacy = "trees" in meta["stages"] and SELECTOR_FILE not in meta.get("files", {})
    if not changed and not legacy:
        return
    hint = ReadOnlyCampaign(directory).rebuild_hint()
    if not force:
        if changed:
            name, problem = next(iter(changed.items()))
            raise CampaignError(
                f"{directory / name}: {problem}; the campaign's outputs are not rebuilt unless "
                f"asked: {hint}"
            )
        raise CampaignError(
            f"{directory / LEGACY_PICKLE}: the trees of this campaign were written by an older "
            f"mlkaps_gpu as a Python pickle, which is never loaded; {hint} as {SELECTOR_FILE}"
        )
    if legacy:
        log.warning(
            "%s: %s (a pickle, never loaded) is replaced; the trees stage is redone from the "
            "measurements (--force)",
            directory,
            LEGACY_PICKLE,
        )
        meta["stages"] = [s for s in meta["stages"] if s != "trees"]
        files = meta.get("files", {})
        meta["files"] = {k: v for k, v in files.items() if k != LEGACY_PICKLE}
        write_json(directory / META, meta)
        (directory / LEGACY_PICKLE).unlink(missing_ok=True)


def _check_store_file(directory: Path, remeasure: bool) -> None:
    """The store part of :func:`check_store`."""
    path = directory / STORE
    if not path.is_file():
        problem: str | None = f"{STORE} is missing"
    else:
        rows, integrity = _store_state(path)
        problem = store_problem(directory, rows, integrity)
    if problem is None:
        if remeasure:
            log.info("%s: the store is sound; nothing to measure again", directory)
        return
    if not remeasure:
        raise CampaignError(remeasure_hint(directory, problem))
    aside = set_aside(directory) if path.exists() else None
    log.warning(
        "%s: %s; measuring again from scratch (--remeasure)%s",
        directory,
        problem,
        f", the old store kept as {aside.name}" if aside else "",
    )
    meta = read_meta(directory)
    meta.update(stages=[], files={}, samples=0)
    write_json(directory / META, meta)


def _store_state(path: Path) -> tuple[int | None, str | None]:
    """``(rows, integrity problem)`` of a store file, read without changing it."""
    import sqlite3

    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            rows = connection.execute("PRAGMA integrity_check").fetchall()
            problems = [str(r[0]) for r in rows if str(r[0]) != "ok"]
            if problems:
                return None, "; ".join(problems[:3])
            table = connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'samples'"
            ).fetchall()
            if not table:  # an empty file, or emptied: no measurement left
                return 0, None
            count = connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
            return int(count), None
        finally:
            connection.close()
    except sqlite3.DatabaseError as error:
        return None, str(error)


def create_files(directory: Path, config: CampaignConfig, setup: Setup, *, rebuild: bool) -> None:
    """What a new campaign directory holds, ``campaign.json`` last (a creation killed before
    it is done again by the next run; see ``interrupted_creation``). ``rebuild`` keeps the
    store of a campaign whose manifest was damaged."""
    atomic_write(directory / "config.toml", config.text.encode("utf-8"))
    environment = capture_environment()
    environment["replay"] = config.kernel.executor == "replay"
    write_json(directory / ENVIRONMENT, environment)
    if rebuild:
        check_store(directory, remeasure=False)
    try:
        rows = len(SampleStore(directory / STORE, setup.space, setup.objectives))
    except StoreError as error:
        raise CampaignError(remeasure_hint(directory, str(error))) from None
    write_json(
        directory / META,
        {
            "config_sha256": config.digest,
            "config_dir": config_folder(config),
            "name": config.name,
            "seed": config.seed,
            "version": __version__,
            "created": time.time(),
            "stages": [],
            "samples": rows,
            "files": {},
        },
    )


def writer_lock(directory: Path) -> CampaignLock:
    """The directory's writer lock, taken (another writer is refused with its process id)."""
    lock = CampaignLock(directory)
    try:
        lock.acquire()
    except LockHeldError as error:
        raise CampaignError(str(error)) from None
    return lock


def read_config(directory: Path) -> tuple[CampaignConfig, Setup]:
    """The configuration and setup of an existing campaign (``Campaign.open``), the store and
    the outputs checked first. Relative paths of the configuration (transfer sources, data
    files) are resolved where the configuration was, as when the campaign was created."""
    meta = read_meta(directory)
    check_store(directory, remeasure=False)  # before anything can change the file
    folder = meta.get("config_dir")
    base = Path(folder) if folder and Path(folder).is_dir() else directory
    try:
        text = (directory / "config.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CampaignError(
            f"{directory}: config.toml cannot be read ({error}); restore it (a copy of the "
            "configuration the campaign was started with)"
        ) from None
    return config_for_reading(directory, text, base)


def config_for_reading(directory: Path, text: str, base: Path) -> tuple[CampaignConfig, Setup]:
    """The configuration and setup of an existing campaign (:meth:`Campaign.open`), its
    outputs checked against their recorded checksums first.

    Where the kernel or its data files cannot be found (a campaign directory handed to someone
    else, replay files moved), a campaign whose trees are done is still read from its directory
    alone: the space comes from ``selector.json`` (its parameters and constraints), the
    settings from ``config.toml`` without its ``[kernel]`` table, and the executor refuses to
    measure, saying what it needs (the original error)."""
    ReadOnlyCampaign(directory).check_outputs()
    try:
        config = parse_config(text, path=base / "config.toml", label="config.toml")
        return config, prepare(config)
    except ConfigError as failure:
        if not (directory / SELECTOR_FILE).is_file():
            raise
        error, problem = failure, str(failure)
    import tomllib

    try:
        data = tomllib.loads(text)
        data["kernel"] = {"executor": "external"}
        data.pop("transfer", None)
        config = CampaignConfig.model_validate(data, context={"base": str(base)})
    except ValueError:  # TOML and validation errors: the original error says more
        raise error from None
    config.bind(text, base / "config.toml", "config.toml")
    selector = ReadOnlyCampaign(directory).load_selector()
    validity = selector.model_.validity
    constraints = [] if validity is None else list(validity.constraints)
    space = Space(list(selector.inputs_), list(selector.design_), constraints)
    executor = NoMeasurement(tuple(config.objectives), directory, problem)
    log.info(
        "%s: reading the campaign from its directory alone (%s); commands that measure are refused",
        directory,
        problem,
    )
    return config, Setup(space, executor, list(config.objectives), list(config.objectives.values()))


class NoMeasurement(ExternalExecutor):
    """The executor of a campaign read from its directory alone: it measures nothing and says
    what measuring would need."""

    def __init__(self, objectives: tuple[str, ...], directory: Path, problem: str) -> None:
        super().__init__(objectives)
        self.directory = directory
        self.problem = problem

    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        raise CampaignError(
            f"{self.directory}: this command measures the kernel, which needs what config.toml "
            f"names and this machine lacks ({self.problem}); restore it, or use the stored "
            "measurements only"
        )


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all or nothing (:func:`mlkaps_gpu._files.write_atomically`)
    through ``<name>.tmp`` beside it: the campaign holds its lock, and its integrity check
    knows those names."""
    write_atomically(path, data, unique=False)


def config_folder(config: CampaignConfig) -> str:
    """The folder a configuration's relative paths are relative to."""
    return str(config.path.resolve().parent)


def write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True).encode())


def atomic_csv(table: pd.DataFrame, path: Path) -> None:
    atomic_write(path, table.to_csv(index=False).encode())


__all__ = [
    "NoMeasurement",
    "atomic_csv",
    "atomic_write",
    "check_store",
    "config_folder",
    "config_for_reading",
    "create_files",
    "read_config",
    "target_state",
    "write_json",
    "writer_lock",
]
