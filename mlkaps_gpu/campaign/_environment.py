"""Where measurements were taken: CPU, GPU, compiler and package versions.

A campaign records its environment in ``environment.json`` when it is created; commands that use
its results on a machine (``select``, and later ``validate`` and ``merge``) compare the current
machine with it and warn when the identity fields differ, since tuned configurations are only
valid for the architecture they were measured on.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
from typing import Any

#: Fields that identify an architecture: a difference in any of them triggers the warning.
IDENTITY_FIELDS = (
    "cpu_model",
    "cpu_id",
    "cpu_cores",
    "machine",
    "gpu_name",
    "gpu_compute_capability",
)
#: Identity fields that campaigns recorded before them lack: compared only where recorded.
LATER_IDENTITY_FIELDS = ("cpu_id",)
_PACKAGES = (
    "mlkaps_gpu",
    "numpy",
    "pandas",
    "scipy",
    "scikit-learn",
    "lightgbm",
    "pymoo",
    "cffi",
    "cupy-cuda12x",
    "cupy-cuda13x",
    "cupy",
)


class EnvironmentMismatchWarning(UserWarning):
    """The current machine differs from the one a campaign measured on."""


def _cpuinfo() -> dict[str, str]:
    """``/proc/cpuinfo``'s fields, lower-case keys, the first value of each (the first
    processor's); empty where it cannot be read."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, separator, value = line.partition(":")
                if separator:
                    fields.setdefault(key.strip().lower(), value.strip())
    except OSError:
        pass
    return fields


def _cpu_model() -> str:
    fields = _cpuinfo()
    for key in ("model name", "hardware", "cpu model"):
        if fields.get(key):
            return fields[key]
    return platform.processor() or platform.machine()


def cpu_id() -> str | None:
    """The CPU's family, model, stepping and cache size (``/proc/cpuinfo``; None elsewhere):
    a virtual machine may give two generations one model name (``AMD EPYC``), and their caches
    move which configuration of a kernel is fastest (a tuned LU's best block size 16 on one,
    8 on the other, both named so)."""
    fields = _cpuinfo()
    parts = [
        f"{label} {fields[key]}"
        for key, label in (
            ("cpu family", "family"),
            ("model", "model"),
            ("stepping", "stepping"),
            ("cache size", "cache"),
        )
        if fields.get(key)
    ]
    return ", ".join(parts) or None


def _output_lines(command: list[str], *, stderr: bool = True) -> list[str]:
    """The non-blank lines (stripped) a command prints on stdout, then on stderr unless told
    not to; none when it is not installed, cannot run or fails."""
    executable = shutil.which(command[0])
    if executable is None:
        return []
    try:
        result = subprocess.run(
            [executable, *command[1:]], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if result.returncode != 0:
        return []
    text = result.stdout + (result.stderr if stderr else "")
    return [line.strip() for line in text.splitlines() if line.strip()]


def _first_line(command: list[str]) -> str | None:
    lines = _output_lines(command)
    return lines[0] if lines else None


def _last_line(command: list[str]) -> str | None:
    """The last line of stdout (``nvcc --version`` ends with its build; a warning on stderr
    must not take its place)."""
    lines = _output_lines(command, stderr=False)
    return lines[-1] if lines else None


def _gpu() -> dict[str, Any]:
    """GPU name, compute capability and driver, through CuPy when importable, else nvidia-smi."""
    try:
        import cupy  # noqa: PLC0415 - optional dependency, loaded only here

        if cupy.cuda.runtime.getDeviceCount() > 0:
            properties = cupy.cuda.runtime.getDeviceProperties(0)
            name = properties["name"]
            return {
                "gpu_name": name.decode() if isinstance(name, bytes) else str(name),
                "gpu_compute_capability": f"{properties['major']}.{properties['minor']}",
                "gpu_driver": str(cupy.cuda.runtime.driverGetVersion()),
                "gpu_count": int(cupy.cuda.runtime.getDeviceCount()),
            }
    except Exception:  # noqa: BLE001, S110 - no CuPy, no driver or no device: fall through
        pass
    line = _first_line(
        ["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"]
    )
    if line and line.count(",") >= 2:
        name, capability, driver = (part.strip() for part in line.split(",")[:3])
        return {"gpu_name": name, "gpu_compute_capability": capability, "gpu_driver": driver}
    return {"gpu_name": None, "gpu_compute_capability": None, "gpu_driver": None}


def _versions() -> dict[str, str]:
    versions = {}
    for package in _PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def capture_environment() -> dict[str, Any]:
    """A JSON-able description of this machine and its software."""
    environment: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "cpu_id": cpu_id(),
        "cpu_cores": os.cpu_count(),
        "machine": platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "c_compiler": _first_line(["cc", "--version"]),
        "nvcc": _last_line(["nvcc", "--version"]),
    }
    environment.update(_gpu())
    environment["packages"] = _versions()
    return environment


def environment_differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Identity fields that differ, as ``"field: recorded -> current"`` lines."""
    differences = []
    for field in IDENTITY_FIELDS:
        if field in LATER_IDENTITY_FIELDS and field not in recorded:
            continue  # recorded before the field existed
        if recorded.get(field) != current.get(field):
            differences.append(f"{field}: {recorded.get(field)!r} -> {current.get(field)!r}")
    return differences


def summary_line(environment: dict[str, Any]) -> str:
    """One line for header provenance comments."""
    parts = [f"{environment.get('cpu_model')} ({environment.get('cpu_cores')} cores)"]
    if environment.get("gpu_name"):
        parts.append(
            f"GPU {environment['gpu_name']} (sm {environment.get('gpu_compute_capability')}, "
            f"driver {environment.get('gpu_driver')})"
        )
    if environment.get("c_compiler"):
        parts.append(str(environment["c_compiler"]))
    return "; ".join(parts)
