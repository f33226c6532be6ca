"""Compile a generated header from a small translation unit (C, C++ or CUDA) with a subprocess."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mlkaps_gpu.codegen._names import NamePlan
from mlkaps_gpu.trees import DecisionModel

HEADER_NAME = "selector.h"


class CompileError(RuntimeError):
    """The compiler rejected a generated header; the message holds its command and output."""


def example_call(model: DecisionModel, prefix: str, *, cuda: bool = False) -> str:
    """Source that calls ``<prefix>_select`` once (from a kernel too when ``cuda``).

    Each argument is the first domain value of its input (or its range's low end), so compiling
    this instantiates every function of the header, as a real caller would.
    """
    plan = NamePlan.build(prefix, model.inputs, model.design, model.tree_names)
    arguments = []
    for parameter, names in zip(model.inputs, plan.inputs, strict=True):
        if parameter.kind == "categorical":
            arguments.append(names.enum_constants[0])
        elif parameter.kind == "bool":
            arguments.append("1")
        elif parameter.kind == "int":
            arguments.append(f"{int(parameter.domain_values()[0])}LL")
        else:
            arguments.append(repr(float(parameter.domain_values()[0])))
    call = f"{plan.select_function}({', '.join(arguments)})"
    fields = " + ".join(f"(double)result.{names.field}" for names in plan.outputs)
    body = (
        f"{plan.hd_macro} double {prefix}_example_sum(void);\n"
        f"{plan.hd_macro} double {prefix}_example_sum(void)\n"
        "{\n"
        f"    {plan.config_type} result = {call};\n"
        f"    return {fields};\n"
        "}\n"
    )
    if cuda:
        body += (
            f"__global__ void {prefix}_example_kernel(double *out)\n"
            "{\n"
            f"    out[0] = {prefix}_example_sum();\n"
            "}\n"
        )
    return body


def compile_check(
    header: str,
    compiler_cmd: Sequence[str],
    *,
    suffix: str = ".c",
    body: str = "",
    workdir: str | Path | None = None,
    timeout: float = 120.0,
) -> str:
    """Compile ``#include "selector.h"`` plus ``body`` to an object file.

    Args:
        header: the header text.
        compiler_cmd: the compiler and its flags, e.g. ``["gcc", "-std=c99", "-Werror"]``;
            ``-c <source> -o <object>`` is appended.
        suffix: source suffix, which picks the language (``.c``, ``.cpp``, ``.cu``).
        body: code after the include (e.g. :func:`example_call`); without it the unit only
            declares one typedef, as ISO C forbids an empty translation unit.
        workdir: directory for the files (a temporary one when ``None``).
        timeout: seconds before the compiler is stopped.

    Returns:
        The compiler's output (warnings that did not fail the build).

    Raises:
        CompileError: the compiler failed, or could not be run.
    """
    if not compiler_cmd:
        raise ValueError("compiler_cmd is empty; give e.g. ['gcc', '-std=c99']")
    source_text = f'#include "{HEADER_NAME}"\n\n' + (body or "typedef int compile_check_unit;\n")
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        directory = Path(tmp)
        (directory / HEADER_NAME).write_text(header, encoding="utf-8")
        source = directory / f"unit{suffix}"
        source.write_text(source_text, encoding="utf-8")
        command = [*map(str, compiler_cmd), "-c", str(source), "-o", str(directory / "unit.o")]
        return run_compiler(command, cwd=directory, timeout=timeout)


def run_compiler(command: Sequence[str], *, cwd: Path, timeout: float = 120.0) -> str:
    """Run one compiler command (an argument list, no shell); return its output."""
    try:
        result = subprocess.run(
            list(command), cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CompileError(f"could not run {' '.join(command)}: {error}") from error
    output = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        raise CompileError(
            f"{' '.join(command)} failed with exit status {result.returncode}:\n{output}"
        )
    return output
