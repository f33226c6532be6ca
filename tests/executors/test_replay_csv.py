"""CSV replay tables: synthetic files and the GC_TLA syr2k tables when ``MLKAPS_GPU_DATA`` is
set."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mlkaps_gpu.executors._replay_data import ReplayDataError, load_replay_csv

DESIGN = ["p0", "p1", "p2", "p3", "p4", "p5"]
CSV = """p0,p1,p3,objective,elapsed_sec
#pragma on,,4,0.5,10.0
 ,,8,1.0,11.0
#pragma on,"#pragma x(a,b)",8,0.25,12.0
 ,"#pragma x(a,b)",4,,13.0
"""


@pytest.fixture
def small_csv(tmp_path: Path) -> Path:
    path = tmp_path / "small.csv"
    path.write_text(CSV)
    return path


def test_layout_and_blank_pragmas(small_csv):
    table = load_replay_csv(small_csv, design_columns=["p0", "p1", "p3"], failure_values=(1.0,))
    records = table.records
    assert table.keys == ("p0", "p1", "p3")
    assert table.objective == "time"
    assert list(records.columns) == ["p0", "p1", "p3", "time", "status", "message", "raw_times"]
    assert records["p0"].dtype == object
    assert records["p3"].dtype == np.int64
    assert records["p0"].tolist() == ["#pragma on", "", "#pragma on", ""]
    assert records["p1"].tolist() == ["", "", "#pragma x(a,b)", "#pragma x(a,b)"]
    assert table.tune_params == {
        "p0": ["", "#pragma on"],
        "p1": ["", "#pragma x(a,b)"],
        "p3": [4, 8],
    }
    assert records["status"].tolist() == ["ok", "runtime_error", "ok", "runtime_error"]
    assert "failure marker" in records["message"].iloc[1]
    assert "no numeric" in records["message"].iloc[3]
    assert math.isnan(records["time"].iloc[1])
    assert json.loads(records["raw_times"].iloc[0]) == [0.5]
    assert records["raw_times"].iloc[1] == "[]"
    assert table.best() == 0.25


def test_no_value_is_a_failure_marker_unless_given(small_csv):
    table = load_replay_csv(small_csv, design_columns=["p0", "p1", "p3"])
    assert table.records["status"].tolist() == ["ok", "ok", "ok", "runtime_error"]
    assert table.records["time"].iloc[1] == 1.0


def test_objective_names(small_csv):
    table = load_replay_csv(
        small_csv,
        design_columns=["p0", "p1", "p3"],
        objective="seconds",
        objective_column="elapsed_sec",
    )
    assert table.objective == "seconds"
    assert table.records["seconds"].tolist() == [10.0, 11.0, 12.0, 13.0]


def test_the_objective_column_defaults_to_the_objectives_name(tmp_path: Path):
    path = tmp_path / "mine.csv"
    path.write_text("tile,time,objective\n4,1.0,9.0\n8,2.0,9.0\n")
    table = load_replay_csv(path, design_columns=["tile"])
    assert table.records["time"].tolist() == [1.0, 2.0]  # the `time` column, 1.0 no failure
    assert table.n_failed() == 0
    other = load_replay_csv(path, design_columns=["tile"], objective="seconds")
    assert other.records["seconds"].tolist() == [9.0, 9.0]  # no `seconds`: `objective`
    with pytest.raises(ReplayDataError, match=r"missing column\(s\) 'elapsed' \(columns: tile,"):
        load_replay_csv(path, design_columns=["tile"], objective_column="elapsed")


def test_errors(tmp_path: Path, small_csv):
    with pytest.raises(ReplayDataError, match=r"small\.csv: missing column\(s\) 'p9'"):
        load_replay_csv(small_csv, design_columns=["p0", "p9"])
    with pytest.raises(ReplayDataError, match="no such file"):
        load_replay_csv(tmp_path / "absent.csv", design_columns=["p0"])
    dup = tmp_path / "dup.csv"
    dup.write_text("p3,objective\n4,1.5\n4,2.5\n8,3.5\n")
    with pytest.raises(ReplayDataError, match=r"dup\.csv: 1 configuration"):
        load_replay_csv(dup, design_columns=["p3"])
    table = load_replay_csv(dup, design_columns=["p3"], duplicates="first")
    assert table.records["time"].tolist() == [1.5, 3.5]


# ----------------------------------------------------------------------------- real data
@pytest.mark.parametrize(
    ("name", "failed", "best"),
    [("all_SM_N130.csv", 0, 0.0004395), ("all_XL_N2000.csv", 5, 1.5308715)],
)
def test_real_syr2k(replay_data, name, failed, best):
    table = load_replay_csv(
        replay_data / "syr2k_cpu" / name, design_columns=DESIGN, failure_values=(1.0,)
    )
    records = table.records
    assert len(records) == 10648
    assert table.n_failed() == failed
    assert (records.loc[records["status"] != "ok", "time"].isna()).all()
    for pragma in ("p0", "p1", "p2"):
        values = table.tune_params[pragma]
        assert len(values) == 2 and values[0] == "" and values[1].startswith("#pragma clang")
    assert table.tune_params["p3"] == [4, 8, 16, 20, 32, 50, 64, 80, 96, 100, 128]
    assert table.tune_params["p4"] == [4, 8, 16, 20, 32, 50, 64, 80, 100, 128, 2048]
    assert table.tune_params["p5"] == [4, 8, 16, 20, 32, 50, 64, 80, 100, 128, 256]
    # In XL the failure marker 1.0 would otherwise be the fastest run (the true best is 1.53 s).
    assert table.best() == pytest.approx(best)


@pytest.mark.parametrize("key", ["failure_values = [1.0]", 'objective_column = "t"'])
def test_csv_keys_are_refused_for_kernel_tuner_caches(tmp_path: Path, key: str):
    from mlkaps_gpu.campaign import ConfigError, parse_config

    (tmp_path / "a.json").write_text("{}")
    text = (
        '[campaign]\nname = "c"\n[kernel]\nexecutor = "replay"\nfiles = "a.json"\n'
        f'{key}\n[objectives]\ntime = "minimize"\n[sampling]\nbudget = 10\n'
    )
    with pytest.raises(ConfigError, match=r'applies only to format = "csv"'):
        parse_config(text, path=tmp_path / "c.toml", label="c.toml")


def test_csv_keys_of_the_config_reach_the_loader(tmp_path: Path):
    from mlkaps_gpu.campaign import parse_config

    (tmp_path / "t.csv").write_text("tile,seconds\n4,9.0\n8,2.0\n")
    text = (
        '[campaign]\nname = "c"\n[kernel]\nexecutor = "replay"\nformat = "csv"\n'
        'files = "t.csv"\ndesign_columns = ["tile"]\nobjective_column = "seconds"\n'
        'failure_values = [9.0]\n[objectives]\ntime = "minimize"\n[sampling]\nbudget = 10\n'
    )
    kernel = parse_config(text, path=tmp_path / "c.toml", label="c.toml").kernel
    assert kernel.replay_options() == {
        "objective_column": "seconds",
        "failure_values": (9.0,),
        "design_columns": ["tile"],
    }
    table = load_replay_csv(tmp_path / "t.csv", **kernel.replay_options())
    assert table.records["status"].tolist() == ["runtime_error", "ok"]
