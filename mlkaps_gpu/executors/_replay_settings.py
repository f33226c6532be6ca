"""``[kernel]`` of ``executor = "replay"``: recorded measurements instead of a kernel.

A replay reads one file per value of an input (Kernel Tuner caches, CSV tables, T4 files), or one
table over input points (``input_columns``, or an AutoHeuristic file). Its files are resolved
and must exist when the configuration is loaded; they are read when the executor is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, model_validator

from mlkaps_gpu._settings import FiniteFloat, SettingError
from mlkaps_gpu.executors._settings import KernelSettingsBase, base_folder, expand_path
from mlkaps_gpu.space import IdentifierError, check_identifier

#: Keys that describe the columns of a table (``format = "csv"`` or ``"parquet"`` only).
TABLE_KEYS = ("design_columns", "objective_column", "failure_values", "input_columns")


class ReplayKernelSettings(KernelSettingsBase):
    """``[kernel]`` with ``executor = "replay"``."""

    executor: Literal["replay"] = Field(description="`replay`: recorded measurements.")
    files: str | dict[str, dict[str, str]] = Field(
        description=(
            "replay: a data file, or `{input = {value = file, ...}}` (one file per value of an "
            "input, e.g. per GPU); `${VAR}` is expanded, relative paths are relative to the "
            "configuration file."
        ),
        json_schema_extra={"allowed": 'a path, or a table {input = {value = "path", ...}}'},
    )
    format: Literal["kernel_tuner", "csv", "t4", "parquet", "autoheuristic"] = Field(
        default="kernel_tuner",
        description=(
            "replay: Kernel Tuner cache files, CSV tables, T4 results files (the common "
            "results format of auto-tuners; the objective is the measurement named `objective`), "
            "Parquet tables (with `input_columns`, needs pyarrow), or PyTorch AutoHeuristic "
            "files (`autoheuristic`: a table over input shapes, read as it is)."
        ),
    )
    objective: str = Field(
        default="time",
        description="replay: the data's objective (cache field, CSV column or T4 measurement).",
    )
    design_columns: list[str] | None = Field(
        default=None,
        description="replay (csv, parquet): the columns that are design parameters.",
    )
    input_columns: list[str] | None = Field(
        default=None,
        min_length=1,
        description=(
            "replay (csv, parquet): the columns that form the input point of a table over "
            "inputs (a table replay: one file whose rows are inputs, configuration, "
            "objective); C identifiers, they become the header's arguments."
        ),
        json_schema_extra={"allowed": "a non-empty list of column names"},
    )
    aggregate: Literal["median", "mean"] = Field(
        default="median",
        description=(
            "replay (table over inputs): the objective of a cell measured several times "
            "(repeated rows): the median or the mean of its finite repeat times."
        ),
    )
    objective_column: str | None = Field(
        default=None,
        description=(
            "replay (csv): the column holding the measured objective (default: the column named "
            "as `objective`, else the column `objective`)."
        ),
    )
    failure_values: list[FiniteFloat] = Field(
        default_factory=list,
        description=(
            "replay (csv): objective values that mark a failed run (e.g. `[1.0]` for a runner "
            "that wrote 1.0 on failure); none by default."
        ),
    )
    key_suffix: str | None = Field(
        default=None, description="replay: a suffix of the data's configuration keys to strip."
    )
    suffix_keys: list[str] | None = Field(
        default=None, description="replay: the parameters the `key_suffix` stands for."
    )

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ReplayKernelSettings:
        if self.suffix_keys is not None and self.key_suffix is None:
            raise SettingError("suffix_keys", "needs key_suffix", self.suffix_keys)
        if self.format != "kernel_tuner" and self.key_suffix is not None:
            raise SettingError(
                "key_suffix",
                'applies only to format = "kernel_tuner" (cache keys)',
                self.key_suffix,
            )
        if self.format not in ("csv", "parquet"):
            for key in TABLE_KEYS:
                if self.given(key):
                    raise SettingError(
                        key,
                        'applies only to format = "csv" or "parquet" (tables)',
                        getattr(self, key),
                    )
        self._check_table_replay()
        self.files = _resolve_files(self.files, base_folder(info))
        return self

    @property
    def table_replay(self) -> bool:
        """Whether this is a replay of one table over input points (``input_columns``, or an
        AutoHeuristic file)."""
        return self.input_columns is not None or self.format == "autoheuristic"

    def _check_table_replay(self) -> None:
        if self.format == "parquet" and self.input_columns is None:
            raise SettingError(
                "input_columns", 'missing: format = "parquet" reads a table over inputs'
            )
        if self.format == "parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise SettingError(
                    "format", "parquet needs pyarrow (pip install pyarrow), or use a CSV", "parquet"
                ) from None
        if not self.table_replay:
            if self.given("aggregate"):
                raise SettingError(
                    "aggregate",
                    "applies only to a table over inputs (input_columns, or format = "
                    '"autoheuristic")',
                    self.aggregate,
                )
            return
        if not isinstance(self.files, str):
            raise SettingError(
                "files",
                "a table over inputs is one file (its input columns select the rows), not "
                "{input = {value = file}}",
                self.files,
            )
        if self.format != "autoheuristic" and not self.design_columns:
            raise SettingError("design_columns", "missing: input_columns needs design_columns")
        for key in ("input_columns", "design_columns"):
            for index, column in enumerate(getattr(self, key) or []):
                try:
                    check_identifier(column, what="column name")
                except IdentifierError as error:
                    raise SettingError(
                        f"{key}[{index}]", f"{error} (it becomes a name in the C header)", column
                    ) from None
        both = sorted(set(self.input_columns or []) & set(self.design_columns or []))
        if both:
            raise SettingError(
                "input_columns", f"{both[0]!r} is also in design_columns", self.input_columns
            )

    def replay_options(self) -> dict[str, Any]:
        """The loader options of a replay kernel (``ReplayExecutor.from_files`` keywords besides
        ``format`` and ``objective``): CSV columns and failure markers, a cache's key suffix."""
        options: dict[str, Any] = {}
        if self.table_replay:
            options["aggregate"] = self.aggregate
            if self.format != "autoheuristic":
                options["input_columns"] = list(self.input_columns or [])
                options["design_columns"] = list(self.design_columns or [])
                options["objective_column"] = self.objective_column
                options["failure_values"] = tuple(self.failure_values)
                options["format"] = self.format
            return options
        if self.format == "csv":
            options["objective_column"] = self.objective_column
            options["failure_values"] = tuple(self.failure_values)
            if self.design_columns:
                options["design_columns"] = list(self.design_columns)
        if self.key_suffix:
            options["key_suffix"] = self.key_suffix
            options["suffix_keys"] = tuple(self.suffix_keys or ())
        return options


def _resolve_files(files: Any, base: Path) -> Any:
    def resolve(value: str, key: str) -> str:
        path = expand_path(value, key, base)
        if not path.is_file():
            raise SettingError(key, f"replay file not found: {path}", value)
        return str(path)

    if isinstance(files, str):
        return resolve(files, "files")
    assert isinstance(files, dict)
    if len(files) != 1:
        raise SettingError(
            "files", "must be a path or {input = {value = path, ...}} with one input", files
        )
    ((input_name, mapping),) = files.items()
    if not mapping:
        raise SettingError(f"files.{input_name}", "must map input values to files", mapping)
    return {
        input_name: {
            value: resolve(file, f"files.{input_name}.{value}") for value, file in mapping.items()
        }
    }


__all__ = ["TABLE_KEYS", "ReplayKernelSettings"]
