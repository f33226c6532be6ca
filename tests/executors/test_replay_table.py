"""Replay tables over inputs (issue 39, point 1): CSV / Parquet tables with input columns and
PyTorch AutoHeuristic files, their cells (repeats, failures), lookups and scores."""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.executors import (
    INVALID,
    NOT_TRITON,
    OK,
    RUNTIME_ERROR,
    ReplayDataError,
    TableReplayExecutor,
    autoheuristic_table,
    choice_of,
    choice_strings,
    fraction_of_optimum,
    load_autoheuristic,
    load_input_table,
    parse_choices,
)

TRITON_A = "type=triton_BLOCK-M=64_BLOCK-K=32_BLOCK-N=128_numstages=3_numwarps=4"
TRITON_B = "type=triton_BLOCK-M=16_BLOCK-K=64_BLOCK-N=32_numstages=2_numwarps=2"
EXTERN = "extern_fallback_mixed_mm"


def write_table(path: Path) -> Path:
    """Two shapes (m, n, dtype) x two configurations (bm, w), repeats and one failed cell."""
    rows = [
        # m, n, dtype, bm, w, time
        (16, 1024, "fp16", 32, 4, 1.0),
        (16, 1024, "fp16", 32, 4, 3.0),
        (16, 1024, "fp16", 32, 4, 2.0),  # median 2.0, mean 2.0
        (16, 1024, "fp16", 64, 8, 4.0),
        (16, 1024, "fp16", 64, 8, 6.0),  # median 5.0
        (256, 4096, "bf16", 32, 4, "inf"),
        (256, 4096, "bf16", 32, 4, "inf"),  # every repeat failed
        (256, 4096, "bf16", 64, 8, 0.5),
        (256, 4096, "bf16", 64, 8, "inf"),  # one of two failed: ok, 0.5
    ]
    frame = pd.DataFrame(rows, columns=["m", "n", "dtype", "bm", "w", "time"])
    frame.to_csv(path, index=False)
    return path


def test_csv_table_cells(tmp_path: Path) -> None:
    table = load_input_table(
        write_table(tmp_path / "t.csv"),
        input_columns=["m", "n", "dtype"],
        design_columns=["bm", "w"],
    )
    assert table.input_names == ["m", "n", "dtype"] and table.design_names == ["bm", "w"]
    assert table.n_points() == 2 and len(table.records) == 4
    kinds = {p.name: (p.kind, p.low, p.high, p.log) for p in table.inputs}
    assert kinds["m"] == ("int", 16, 256, True)  # positive, 16x spread: log
    assert kinds["n"] == ("int", 1024, 4096, False)  # 4x: linear
    assert kinds["dtype"][0] == "categorical"
    records = table.records.set_index(["m", "bm"])
    assert records.loc[(16, 32), "time"] == 2.0 and records.loc[(16, 32), "n_repeats"] == 3
    assert records.loc[(16, 64), "time"] == 5.0
    assert records.loc[(256, 32), "status"] == RUNTIME_ERROR
    assert math.isnan(records.loc[(256, 32), "time"])
    assert records.loc[(256, 64), "status"] == OK and records.loc[(256, 64), "time"] == 0.5
    assert records.loc[(256, 64), "message"] == "1 of 2 repeats failed"
    mean = load_input_table(
        tmp_path / "t.csv",
        input_columns=["m", "n", "dtype"],
        design_columns=["bm", "w"],
        aggregate="mean",
    )
    assert mean.records.set_index(["m", "bm"]).loc[(16, 64), "time"] == 5.0


def test_executor_answers_listed_rows_and_refuses_others(tmp_path: Path) -> None:
    table = load_input_table(
        write_table(tmp_path / "t.csv"),
        input_columns=["m", "n", "dtype"],
        design_columns=["bm", "w"],
    )
    executor = TableReplayExecutor(table)
    rows = pd.DataFrame(
        {
            "m": [16, 256, 16, 17],
            "n": [1024, 4096, 1024, 1024],
            "dtype": ["fp16", "bf16", "fp16", "fp16"],
            "bm": [32, 32, 32, 32],
            "w": [4, 4, 8, 4],
        }
    )
    result = executor.run(rows)
    assert result["status"].tolist() == [OK, RUNTIME_ERROR, INVALID, INVALID]
    assert result["time"].iloc[0] == 2.0
    assert json.loads(result["raw_times"].iloc[0]) == [1.0, 3.0, 2.0]  # the repeats
    assert result["n_repeats"].tolist() == [3, 0, 0, 0]
    listed = executor.listed_rows()
    assert len(listed) == 4 and list(listed.columns) == ["m", "n", "dtype", "bm", "w"]
    best, configuration = executor.optimum({"m": 256, "n": 4096, "dtype": "bf16"})
    assert best == 0.5 and configuration == {"bm": 64, "w": 8}


def test_fraction_of_optimum_scores_unlisted_and_failed_answers_as_the_slowest(
    tmp_path: Path,
) -> None:
    table = load_input_table(
        write_table(tmp_path / "t.csv"),
        input_columns=["m", "n", "dtype"],
        design_columns=["bm", "w"],
    )
    answers = pd.DataFrame(
        {
            "m": [16, 16, 256, 256],
            "n": [1024, 1024, 4096, 4096],
            "dtype": ["fp16", "fp16", "bf16", "bf16"],
            "bm": [32, 64, 32, 128],
            "w": [4, 8, 4, 8],
        }
    )
    scored = fraction_of_optimum(table, answers)
    assert scored["fraction"].tolist() == pytest.approx([1.0, 2.0 / 5.0, 1.0, 1.0])
    assert scored["listed"].tolist() == [True, True, True, False]
    # failed (256, 32) and unlisted (256, 128) score as that shape's slowest ok time (0.5)
    assert scored["t_answer"].tolist()[2:] == [0.5, 0.5]


@pytest.mark.parametrize("column", ["int", "my-size", "2m"])
def test_input_names_must_be_c_identifiers(tmp_path: Path, column: str) -> None:
    path = tmp_path / "bad.csv"
    pd.DataFrame({column: [1, 2], "bm": [1, 1], "time": [1.0, 2.0]}).to_csv(path, index=False)
    with pytest.raises(ReplayDataError, match=r"bad\.csv.*rename the column"):
        load_input_table(path, input_columns=[column], design_columns=["bm"])


def test_table_errors_name_the_file_and_column(tmp_path: Path) -> None:
    path = write_table(tmp_path / "t.csv")
    with pytest.raises(ReplayDataError, match=r"t\.csv: missing column\(s\) 'k'"):
        load_input_table(path, input_columns=["m", "k"], design_columns=["bm"])
    with pytest.raises(ReplayDataError, match="both input and design"):
        load_input_table(path, input_columns=["m", "bm"], design_columns=["bm"])
    with pytest.raises(ReplayDataError, match="no such file"):
        load_input_table(tmp_path / "none.csv", input_columns=["m"], design_columns=["bm"])


def test_parquet_table(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    frame = pd.read_csv(write_table(tmp_path / "t.csv"))
    frame.to_parquet(tmp_path / "t.parquet")
    table = load_input_table(
        tmp_path / "t.parquet", input_columns=["m", "n", "dtype"], design_columns=["bm", "w"]
    )
    assert len(table.records) == 4 and table.n_points() == 2


# ------------------------------------------------------------------------------ AutoHeuristic
def write_autoheuristic(path: Path, *, compress: bool) -> Path:
    metadata = {
        "shared_memory": 166912,
        "device_capa": [8, 0],
        "name": "mixed_mm",
        "numerical_features": ["m", "k"],
        "categorical_features": ["mat1_dtype", "mat2_iscontig"],
    }
    lines = [
        json.dumps(metadata),
        "m,k,mat1_dtype,mat2_iscontig,choice,feedback",
        f"2,4096,torch.float16,False,{EXTERN},0.2",
        f"2,4096,torch.float16,False,{EXTERN},0.4",
        f"2,4096,torch.float16,False,{TRITON_A},0.1",
        f"2,4096,torch.float16,False,{TRITON_A},0.3",
        f"2,4096,torch.float16,False,{TRITON_A},0.2",
        f"64,1024,torch.bfloat16,False,{TRITON_B},inf",
        f"64,1024,torch.bfloat16,False,{TRITON_B},inf",
        f"64,1024,torch.bfloat16,False,{TRITON_A},0.05",
    ]
    text = "\n".join(lines) + "\n"
    if compress:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("compress", [True, False])
def test_autoheuristic_file_as_it_is(tmp_path: Path, compress: bool) -> None:
    path = write_autoheuristic(tmp_path / "mm.txt.gz", compress=compress)
    table = autoheuristic_table(path)
    assert table.input_names == ["m", "k", "mat1_dtype", "mat2_iscontig"]
    assert table.design_names == [
        "kind",
        "block_m",
        "block_k",
        "block_n",
        "num_stages",
        "num_warps",
    ]
    assert table.metadata["device_capa"] == [8, 0]
    assert {p.name: p.kind for p in table.inputs}["mat2_iscontig"] == "bool"
    records = table.records.set_index(["m", "choice"])
    extern = records.loc[(2, EXTERN)]
    assert extern["kind"] == EXTERN and extern["block_m"] == NOT_TRITON
    assert extern["time"] == pytest.approx(0.3)  # median of 0.2 and 0.4
    triton = records.loc[(2, TRITON_A)]
    assert (triton["kind"], triton["block_m"], triton["block_k"], triton["block_n"]) == (
        "triton",
        64,
        32,
        128,
    )
    assert (triton["num_stages"], triton["num_warps"], triton["time"]) == (3, 4, 0.2)
    assert records.loc[(64, TRITON_B), "status"] == RUNTIME_ERROR  # inf: a failure
    # the design columns name the choice back, exactly
    assert choice_strings(table.records[table.design_names]).tolist() == (
        table.records["choice"].tolist()
    )
    public = load_autoheuristic(path)
    assert public.attrs["input_columns"] == table.input_names
    assert {"choice", "time", "status"} <= set(public.columns)


def test_choices_without_extern_and_negative_values() -> None:
    choices = ["type=triton_BLOCK-M=128_BLOCK-K=-1_BLOCK-N=32_numstages=3_numwarps=4"]
    design = parse_choices(choices)
    assert list(design.columns) == ["block_m", "block_k", "block_n", "num_stages", "num_warps"]
    assert design.iloc[0].tolist() == [128, -1, 32, 3, 4]
    assert choice_of(design.iloc[0].to_dict()) == choices[0]
    other = parse_choices(["orig", "pad"])  # no Triton choice at all: kind alone
    assert list(other.columns) == ["kind"] and other["kind"].tolist() == ["orig", "pad"]
    with pytest.raises(ReplayDataError, match="is not KEY=integer"):
        parse_choices(["type=triton_BLOCK-M=big"])


def test_autoheuristic_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("m,k,choice,feedback\n1,2,x,0.1\n")
    with pytest.raises(ReplayDataError, match=r"bad\.txt: line 1 is not JSON metadata"):
        autoheuristic_table(bad)
    missing = tmp_path / "missing.txt"
    missing.write_text(
        json.dumps({"numerical_features": ["m", "q"], "categorical_features": []})
        + "\nm,choice,feedback\n1,x,0.1\n"
    )
    with pytest.raises(ReplayDataError, match=r"missing\.txt: missing column\(s\) 'q'"):
        autoheuristic_table(missing)


# ---------------------------------------------------------------------------------- real data
def autoheuristic_file(name: str) -> Path:
    root = os.environ.get("MLKAPS_GPU_DATA")
    if not root:
        pytest.skip("MLKAPS_GPU_DATA is not set")
    path = Path(root) / "autoheuristic" / name
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    return path


def test_real_autoheuristic_files() -> None:
    mixed = autoheuristic_table(autoheuristic_file("mixedmm_a100.txt.gz"))
    assert mixed.n_points() == 4299 and len(mixed.records) == 82933
    assert mixed.records["kind"].isin(["triton", EXTERN]).all()
    assert (mixed.records["status"] == OK).all()
    assert (choice_strings(mixed.records[mixed.design_names]) == mixed.records["choice"]).all()
    flex = autoheuristic_table(autoheuristic_file("flexattention_a100.txt.gz"))
    assert flex.n_points() == 6195 and len(flex.records) == 49560
    assert "kind" not in flex.design_names and set(flex.records["block_k"]) == {-1}
    failed = float((flex.records["status"] != OK).mean())
    assert 0.15 < failed < 0.22  # README: 19 % of the runs failed
    executor = TableReplayExecutor(flex)
    sample = flex.records.sample(500, random_state=0)
    result = executor.run(sample[[*flex.input_names, *flex.design_names]])
    assert (result["status"].to_numpy() == sample["status"].to_numpy()).all()
    np.testing.assert_array_equal(result["time"].to_numpy(), sample["time"].to_numpy())
