"""``mlkaps-gpu analyze difficulty DATA`` through the command functions of the analysis CLI."""

from __future__ import annotations

import argparse
import gzip
import json
import os
from pathlib import Path

import pytest

from mlkaps_gpu.cli import _analyze as _cli


def analyze(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="mlkaps-gpu")
    commands = parser.add_subparsers(dest="command", required=True)
    _cli.add_parser(commands)
    return _cli.run(parser.parse_args(["analyze", *argv]))


def write_cache(path: Path) -> None:
    """A 3 x 2 space: best at (bx=32, by=2); (64, 1) failed."""
    times = {(16, 1): 3.0, (16, 2): 2.0, (32, 1): 2.5, (32, 2): 1.0, (64, 2): 1.5}
    cache = {
        f"{bx},{by}": {"bx": bx, "by": by, "time": t, "times": [t]} for (bx, by), t in times.items()
    }
    cache["64,1"] = {"bx": 64, "by": 1, "time": "RuntimeFailedConfig"}
    document = {
        "device_name": "Test GPU",
        "kernel_name": "k",
        "problem_size": [1],
        "tune_params_keys": ["bx", "by"],
        "tune_params": {"bx": [16, 32, 64], "by": [1, 2]},
        "objective": "time",
        "cache": cache,
    }
    with gzip.open(path, "wt") as handle:
        json.dump(document, handle)


def test_difficulty_of_a_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tiny.json.gz"
    write_cache(path)
    plot = tmp_path / "curve.png"
    assert analyze(["difficulty", str(path), "--max-percent", "3", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert "5 configurations" in out and "1 local minima" in out
    assert "| 3% | 1.000 |" in out
    assert plot.stat().st_size > 0


def test_difficulty_of_t4_results_is_the_same_as_of_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "tiny.json.gz"
    write_cache(cache)
    entries = json.loads(gzip.decompress(cache.read_bytes()))["cache"].values()
    results = []
    for entry in entries:
        value = entry["time"]
        failed = isinstance(value, str)
        results.append(
            {
                "configuration": {"bx": entry["bx"], "by": entry["by"]},
                "times": {"runtimes": entry.get("times", [])},
                "invalidity": "runtime" if failed else "correct",
                "correctness": 0 if failed else 1,
                "measurements": [{"name": "time", "value": value, "unit": "ms"}],
            }
        )
    t4 = tmp_path / "tiny_t4.json"
    t4.write_text(json.dumps({"schema_version": "1.0.0", "results": results}))
    summaries = []
    for path in (cache, t4):  # --format auto tells them apart by their content
        assert analyze(["difficulty", str(path), "--json", "--max-percent", "3"]) == 0
        summaries.append(json.loads(capsys.readouterr().out))
    assert summaries[0]["nodes"] == summaries[1]["nodes"] == 5
    assert summaries[0] == {**summaries[1], "data": summaries[0]["data"]}


def test_difficulty_of_a_csv_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "table.csv"
    rows = ["p1,p0,objective", "a,1,2.0", "a,2,1.2", "b,1,0.5", "b,2,3.0", "c,1,1.1"]
    path.write_text("\n".join(rows) + "\n")
    assert analyze(["difficulty", str(path), "--json", "--neighbourhood", "adjacent"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # minima: (a,2)=1.2 (neighbours a1=2.0, b2=3.0) and (b,1)=0.5, the optimum
    assert summary["nodes"] == 5 and summary["local_minima"] == 2
    argv = ["difficulty", str(path), "--json", "--neighbourhood", "adjacent"]
    assert analyze([*argv, "--failure-value", "0.5"]) == 0  # the optimum made a failure
    assert json.loads(capsys.readouterr().out)["nodes"] == 4
    assert summary["proportion_of_centrality"]["0%"] < 1.0


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert analyze(["difficulty", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("x,objective\n1,2\n")
    assert analyze(["difficulty", str(bad)]) == 2
    assert "--design-columns" in capsys.readouterr().err


def test_syr2k_replay_data(capsys: pytest.CaptureFixture[str]) -> None:
    root = os.environ.get("MLKAPS_GPU_DATA")
    if not root or not (Path(root) / "syr2k_cpu" / "all_SM_N130.csv").is_file():
        pytest.skip("MLKAPS_GPU_DATA is not set or lacks syr2k_cpu")
    path = Path(root) / "syr2k_cpu" / "all_SM_N130.csv"
    assert analyze(["difficulty", str(path), "--json", "--failure-value", "1.0"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["nodes"] == 10648
    assert 0.0 < summary["proportion_of_centrality"]["15%"] <= 1.0
