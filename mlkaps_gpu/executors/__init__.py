"""Executors: measure configurations (replay, Python callables, C kernels, CUDA kernels...)."""

from mlkaps_gpu.executors._autoheuristic import (
    NOT_TRITON,
    autoheuristic_executor,
    autoheuristic_table,
    choice_of,
    choice_strings,
    load_autoheuristic,
    parse_choices,
    read_autoheuristic,
)
from mlkaps_gpu.executors._base import (
    COMPILE_ERROR,
    INVALID,
    INVALID_MEASUREMENT,
    OK,
    RESULT_COLUMNS,
    RUNTIME_ERROR,
    STATUSES,
    TIMEOUT,
    Executor,
    ExecutorError,
    empty_results,
    encode_times,
)
from mlkaps_gpu.executors._c_settings import CffiKernelSettings, CupyKernelSettings
from mlkaps_gpu.executors._cffi import CffiExecutor, default_cache_dir
from mlkaps_gpu.executors._command import CommandExecutor
from mlkaps_gpu.executors._command_settings import CommandKernelSettings
from mlkaps_gpu.executors._cupy import CupyExecutor, cupy_available
from mlkaps_gpu.executors._dask import DaskExecutor
from mlkaps_gpu.executors._external import ExternalExecutor, told_results
from mlkaps_gpu.executors._kernel_functions import load_kernel_functions
from mlkaps_gpu.executors._kernel_settings import (
    EXECUTOR_NAMES,
    EXECUTOR_SETTINGS,
    EXECUTORS_ALLOWED,
    KERNEL_KEYS,
    AnyKernelSettings,
    ExternalKernelSettings,
    KernelSettings,
)
from mlkaps_gpu.executors._kernel_tuner_cache import KernelTunerCache, load_kernel_tuner_cache
from mlkaps_gpu.executors._kernel_tuner_export import kernel_tuner_cache
from mlkaps_gpu.executors._python import PythonExecutor
from mlkaps_gpu.executors._python_settings import PythonKernelSettings
from mlkaps_gpu.executors._replay import ReplayExecutor
from mlkaps_gpu.executors._replay_data import ReplayDataError, ReplayTable, load_replay_csv
from mlkaps_gpu.executors._replay_settings import ReplayKernelSettings
from mlkaps_gpu.executors._replay_table import (
    NOT_LISTED,
    InputTable,
    TableReplayExecutor,
    fraction_of_optimum,
    load_input_table,
)
from mlkaps_gpu.executors._settings import ExecutionSettings, KernelSettingsBase, expand_path
from mlkaps_gpu.executors._t4 import load_t4_results, replay_format
from mlkaps_gpu.executors._timing import (
    TimingPolicy,
    TimingSummary,
    median_ci,
    summarize,
    summarize_raw,
)
from mlkaps_gpu.executors._worker_api import Design, KernelCall

__all__ = [
    "NOT_LISTED",
    "NOT_TRITON",
    "InputTable",
    "TableReplayExecutor",
    "autoheuristic_executor",
    "autoheuristic_table",
    "choice_of",
    "choice_strings",
    "load_autoheuristic",
    "fraction_of_optimum",
    "load_input_table",
    "parse_choices",
    "read_autoheuristic",
    "EXECUTOR_NAMES",
    "EXECUTOR_SETTINGS",
    "EXECUTORS_ALLOWED",
    "KERNEL_KEYS",
    "AnyKernelSettings",
    "CffiKernelSettings",
    "CommandKernelSettings",
    "CupyKernelSettings",
    "ExecutionSettings",
    "ExternalKernelSettings",
    "KernelSettings",
    "KernelSettingsBase",
    "PythonKernelSettings",
    "ReplayKernelSettings",
    "expand_path",
    "load_kernel_functions",
    "DaskExecutor",
    "CffiExecutor",
    "CommandExecutor",
    "CupyExecutor",
    "Design",
    "KernelCall",
    "TimingPolicy",
    "TimingSummary",
    "cupy_available",
    "default_cache_dir",
    "median_ci",
    "summarize",
    "summarize_raw",
    "COMPILE_ERROR",
    "INVALID",
    "INVALID_MEASUREMENT",
    "OK",
    "RESULT_COLUMNS",
    "RUNTIME_ERROR",
    "STATUSES",
    "TIMEOUT",
    "Executor",
    "ExecutorError",
    "ExternalExecutor",
    "KernelTunerCache",
    "PythonExecutor",
    "ReplayDataError",
    "ReplayExecutor",
    "ReplayTable",
    "empty_results",
    "encode_times",
    "kernel_tuner_cache",
    "load_kernel_tuner_cache",
    "load_replay_csv",
    "load_t4_results",
    "replay_format",
    "told_results",
]
