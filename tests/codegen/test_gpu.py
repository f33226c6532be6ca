"""The header's device code (nvcc, run on a GPU) answers exactly as ``select``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mlkaps_gpu.codegen import (
    batch_source,
    boundary_inputs,
    decode_outputs,
    input_arrays,
    render_header,
)
from mlkaps_gpu.codegen._verify import C_ARRAY_TYPES, NUMPY_TYPES


def gpu_present() -> bool:
    if shutil.which("nvcc") is None or shutil.which("nvidia-smi") is None:
        return False
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listing.returncode == 0 and "GPU" in listing.stdout


pytestmark = [
    pytest.mark.compiler,
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_present(), reason="needs nvcc and a CUDA GPU"),
]


def harness(header_name: str, kernel: str, input_types: list[str], output_types: list[str]) -> str:
    """A program: read inputs from in_<k>.bin, run the one-thread kernel, write out_<k>.bin."""
    arguments = [f"d_in_{k}" for k in range(len(input_types))]
    arguments += [f"d_out_{k}" for k in range(len(output_types))]
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        f'#include "{header_name}"',
        kernel,
        "static void *device_copy_of(const char *path, size_t bytes)",
        "{",
        "    void *host = malloc(bytes), *device = NULL;",
        '    FILE *file = fopen(path, "rb");',
        "    if (!host || !file || fread(host, 1, bytes, file) != bytes) exit(3);",
        "    fclose(file);",
        "    cudaMalloc(&device, bytes);",
        "    cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice);",
        "    free(host);",
        "    return device;",
        "}",
        "int main(int argc, char **argv)",
        "{",
        "    long long rows = argc > 1 ? atoll(argv[1]) : 0;",
        "    char path[64];",
    ]
    for k, c_type in enumerate(input_types):
        lines.append(f'    snprintf(path, sizeof path, "in_{k}.bin");')
        lines.append(
            f"    {c_type} *d_in_{k} = ({c_type} *)device_copy_of(path, rows * sizeof({c_type}));"
        )
    for k, c_type in enumerate(output_types):
        lines.append(f"    {c_type} *d_out_{k} = NULL;")
        lines.append(f"    cudaMalloc(&d_out_{k}, rows * sizeof({c_type}));")
    lines.append(f"    batch<<<1, 1>>>(rows, {', '.join(arguments)});")
    lines.append("    if (cudaDeviceSynchronize() != cudaSuccess) return 2;")
    for k, c_type in enumerate(output_types):
        lines += [
            "    {",
            f"        {c_type} *host = ({c_type} *)malloc(rows * sizeof({c_type}));",
            f'        FILE *file = fopen("out_{k}.bin", "wb");',
            f"        cudaMemcpy(host, d_out_{k}, rows * sizeof({c_type}), "
            "cudaMemcpyDeviceToHost);",
            f"        fwrite(host, sizeof({c_type}), rows, file);",
            "        fclose(file);",
            "        free(host);",
            "    }",
        ]
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("fixture", ["density_selector", "joint_selector", "checked_selector"])
def test_device_answers_equal_select(fixture: str, request, tmp_path: Path) -> None:
    """Per-parameter, joint, and per-parameter with the run-time check and fallback (the
    fixture's raw trees break constraints on many of these inputs)."""
    selector = request.getfixturevalue(fixture)
    model = selector.model_
    table = boundary_inputs(selector, 10_000, np.random.default_rng(9))
    (tmp_path / "selector.h").write_text(render_header(selector, "mlkaps"), encoding="utf-8")
    _, kernel = batch_source(model, "mlkaps", "batch", qualifier="__global__")
    program = harness(
        "selector.h",
        kernel,
        [C_ARRAY_TYPES[p.kind] for p in model.inputs],
        [C_ARRAY_TYPES[p.kind] for p in model.design],
    )
    (tmp_path / "probe.cu").write_text(program, encoding="utf-8")
    for k, array in enumerate(input_arrays(model, table)):
        np.ascontiguousarray(array).tofile(tmp_path / f"in_{k}.bin")
    subprocess.run(
        ["nvcc", "-std=c++17", "-o", "probe", "probe.cu"], cwd=tmp_path, check=True, timeout=300
    )
    subprocess.run(["./probe", str(len(table))], cwd=tmp_path, check=True, timeout=300)
    produced = [
        np.fromfile(tmp_path / f"out_{k}.bin", dtype=NUMPY_TYPES[p.kind])
        for k, p in enumerate(model.design)
    ]
    expected = selector.select(table)
    for name, values in decode_outputs(model, produced).items():
        np.testing.assert_array_equal(values, expected[name].to_numpy(), err_msg=name)
