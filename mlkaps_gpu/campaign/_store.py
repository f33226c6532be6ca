"""The campaign store: an append-only SQLite table of every measurement.

One row per measured configuration: the input and design values, the objectives, ``status``,
``n_repeats``, the raw repeat times (JSON text), a message, the batch number and a timestamp.
Each batch is appended in one transaction, so a campaign killed at any moment holds either all of
a batch or none of it, and a restarted campaign can count exactly what was measured. Beside it, the
table ``batch_load`` holds one row per batch measured in this process: the machine's load while
it ran (:mod:`._load`), written in the batch's transaction; stores written before it existed,
and batches measured elsewhere (replays, ask / tell, Dask workers), have none. A file that
SQLite cannot read (truncated, overwritten, another program's database) raises
:class:`StoreError`, never a raw SQLite error.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign._load import BatchLoad
from mlkaps_gpu.executors import RESULT_COLUMNS
from mlkaps_gpu.space import Space

_BOOKKEEPING = ("batch", "timestamp")
#: Columns of the ``batch_load`` table (see :class:`~._load.BatchLoad`).
_LOAD_COLUMNS = ("batch", "seconds", "other_cores", "own_cores", "cpus")


class StoreError(RuntimeError):
    """The store file cannot be read or written as a measurement store."""


class SampleStore:
    """SQLite-backed measurement table of one campaign.

    Args:
        path: the database file (created if missing).
        space: the search space (column names and types).
        objectives: objective column names.
    """

    def __init__(self, path: str | Path, space: Space, objectives: Sequence[str]) -> None:
        self.path = Path(path)
        self.space = space
        self.objectives = list(objectives)
        self._columns = [*space.names, *self.objectives, *RESULT_COLUMNS, *_BOOKKEEPING]
        for column in self._columns:
            if not column.isidentifier():
                raise ValueError(f"store column {column!r} is not an identifier")
        declared = ", ".join(f'"{c}" {self._sql_type(c)}' for c in self._columns)
        with self._guard("open"), self._connect() as connection:
            connection.execute(
                f"CREATE TABLE IF NOT EXISTS samples (id INTEGER PRIMARY KEY, {declared})"
            )
            present = {row[1] for row in connection.execute("PRAGMA table_info(samples)")}
        connection.close()
        missing = [c for c in self._columns if c not in present]
        if missing:
            raise StoreError(
                f"{self.path}: its samples table lacks the columns {missing} of this campaign "
                "(a store of another campaign?)"
            )

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        return connection

    @contextlib.contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """SQLite's errors on this file as :class:`StoreError` naming the file."""
        try:
            yield
        except (sqlite3.DatabaseError, pd.errors.DatabaseError) as error:
            raise StoreError(
                f"{self.path}: cannot {action} the measurement store ({error})"
            ) from None

    def check_integrity(self) -> str | None:
        """SQLite's ``PRAGMA integrity_check`` of the file: None when it passes, else the
        first problems it reports."""
        try:
            connection = sqlite3.connect(self.path, timeout=60)
            try:
                rows = connection.execute("PRAGMA integrity_check").fetchall()
            finally:
                connection.close()
        except sqlite3.DatabaseError as error:
            return str(error)
        problems = [str(row[0]) for row in rows if str(row[0]) != "ok"]
        return "; ".join(problems[:3]) if problems else None

    def _sql_type(self, column: str) -> str:
        if column in self.space.parameters:
            kind = self.space.parameters[column].kind
            return {"int": "INTEGER", "bool": "INTEGER", "float": "REAL"}.get(kind, "TEXT")
        if column in self.objectives or column == "timestamp":
            return "REAL"
        if column in ("n_repeats", "batch"):
            return "INTEGER"
        return "TEXT"

    def append(
        self, rows: pd.DataFrame, results: pd.DataFrame, load: BatchLoad | None = None
    ) -> None:
        """Append one measured batch atomically, with the machine's load while it ran."""
        if len(rows) != len(results):
            raise ValueError("append: rows and results differ in length")
        if len(rows) == 0:
            return
        table = pd.concat(
            [rows[self.space.names].reset_index(drop=True), results.reset_index(drop=True)],
            axis=1,
        )
        with self._guard("append to"), self._connect() as connection:
            # batches are appended in order: the last row holds the largest batch number (an
            # index lookup, where MAX(batch) would scan the whole table on every append)
            last = connection.execute("SELECT batch FROM samples ORDER BY id DESC LIMIT 1")
            row = last.fetchone()
            table["batch"] = 0 if row is None else int(row[0]) + 1
            table["timestamp"] = time.time()
            records = []
            for record in table[self._columns].itertuples(index=False, name=None):
                records.append(tuple(_to_sql(v) for v in record))
            marks = ", ".join("?" for _ in self._columns)
            names = ", ".join(f'"{c}"' for c in self._columns)
            connection.execute("BEGIN")
            # column names are checked identifiers (parameters and objectives), never user text
            statement = f"INSERT INTO samples ({names}) VALUES ({marks})"  # noqa: S608
            connection.executemany(statement, records)
            if load is not None:
                connection.execute(
                    "CREATE TABLE IF NOT EXISTS batch_load (batch INTEGER PRIMARY KEY, "
                    "seconds REAL, other_cores REAL, own_cores REAL, cpus INTEGER)"
                )
                connection.execute(
                    "INSERT INTO batch_load VALUES (?, ?, ?, ?, ?)",
                    (
                        int(table["batch"].iloc[0]),
                        load.seconds,
                        load.other_cores,
                        load.own_cores,
                        load.cpus,
                    ),
                )
        connection.close()

    def batch_loads(self) -> pd.DataFrame:
        """The load recorded with each batch (columns ``batch``, ``seconds``, ``other_cores``,
        ``own_cores``, ``cpus``); no rows when none was recorded."""
        with self._guard("read"), self._connect() as connection:
            exists = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='batch_load'"
            ).fetchone()
            table = (
                pd.read_sql_query("SELECT * FROM batch_load ORDER BY batch", connection)
                if exists
                else pd.DataFrame({c: pd.Series(dtype=np.float64) for c in _LOAD_COLUMNS})
            )
        connection.close()
        return table[list(_LOAD_COLUMNS)]

    def __len__(self) -> int:
        with self._guard("count the rows of"), self._connect() as connection:
            count = int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
        connection.close()
        return count

    def load(self) -> pd.DataFrame:
        """Every stored measurement, in insertion order, with parameter dtypes restored."""
        with self._guard("read"), self._connect() as connection:
            names = ", ".join(f'"{c}"' for c in self._columns)
            query = f"SELECT {names} FROM samples ORDER BY id"  # noqa: S608 - checked names
            table = pd.read_sql_query(query, connection)
        connection.close()
        for name in self.space.names:
            parameter = self.space.parameters[name]
            if parameter.kind == "categorical":
                table[name] = table[name].astype(object)
            elif parameter.kind == "bool":
                table[name] = table[name].astype(np.int64).astype(bool)
            else:
                table[name] = table[name].astype(parameter.dtype)
        for name in self.objectives:
            table[name] = table[name].astype(np.float64)
        for name in ("status", "raw_times", "message"):
            table[name] = table[name].astype(object)
        return table

    def valid_samples(self) -> pd.DataFrame:
        """Measurements with status ``ok``."""
        table = self.load()
        return table[table["status"] == "ok"].reset_index(drop=True)


def _to_sql(value: object) -> object:
    if isinstance(value, (np.bool_, bool)):
        return int(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if np.isnan(value) else float(value)
    if isinstance(value, float) and np.isnan(value):
        return None
    return value
