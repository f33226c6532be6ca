"""experiments/seed_sets.py: pooling bench_peers runs and resampling k-seed sets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.experiments._scripts import load_benchkit, load_script

seed_sets = load_script("seed_sets")
tools = load_benchkit("tools")


def runs(tool: str, b: int, values, first_seed: int = 0) -> list[dict]:
    return [
        {"tool": tool, "case": "k", "b": b, "seed": first_seed + s, "input": i, "fraction": v}
        for s, value in enumerate(values)
        for i, v in (("x", value), ("y", value))
    ]


def test_header_rows_come_from_header_files_and_peer_rows_from_peer_files(tmp_path):
    old = tmp_path / "old.csv"
    new = tmp_path / "new.csv"
    pd.DataFrame(
        runs(tools.HEADER, 25, [0.1, 0.1])
        + runs("peer", 25, [0.5, 0.6])
        + runs(tools.BEST_MEASURED, 25, [0.9, 0.9])
    ).to_csv(old, index=False)
    pd.DataFrame(runs(tools.HEADER, 25, [0.8, 0.9]) + runs("peer", 25, [0.1, 0.1])).to_csv(
        new, index=False
    )
    rows = seed_sets.load_rows([new], [old], "k")
    by_tool = rows.groupby("tool")["fraction"].mean()
    assert set(by_tool.index) == {tools.HEADER, "peer"}
    assert by_tool[tools.HEADER] == pytest.approx(0.85)  # from new.csv only
    assert by_tool["peer"] == pytest.approx(0.55)  # from old.csv only
    with pytest.raises(ValueError, match="no rows of case"):
        seed_sets.load_rows([new], [old], "other")


def test_shares_of_resampled_seed_sets():
    rng = np.random.default_rng(1)
    rows = pd.DataFrame(
        runs(tools.HEADER, 25, rng.normal(0.9, 0.01, 30))
        + runs("peer", 25, rng.normal(0.7, 0.01, 10))
        + runs(tools.HEADER, 50, [0.95, 0.95, 0.95, 0.95, 0.3])  # one miss in five seeds
        + runs("peer", 50, [0.85] * 5)
        + [{"tool": tools.RANDOM, "case": "k", "b": 50, "seed": -1, "input": "x", "fraction": 0.5}]
    )
    shares = seed_sets.seed_set_shares(rows, 5, [0.8, 0.9]).set_index("b")
    assert shares.loc[25, "above_all"] == 1.0 and shares.loc[25, "at_least"] == 1.0
    assert shares.loc[25, "header_seeds"] == 30 and shares.loc[25, "peer_seeds"] == 10
    # the header's 5-seed mean is above 0.85 exactly when no draw holds the miss: 0.8 ** 5
    assert shares.loc[50, "above_all"] == pytest.approx(0.8**5, abs=0.02)
    assert shares.loc[50, "peer_seeds"] == 5  # the exact random-search row is no sample
    assert shares.loc[50, "at_least"] == pytest.approx(0.8**5, abs=0.02)


def test_missing_file_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        seed_sets.main(
            [
                "--case",
                "k",
                "--header",
                str(tmp_path / "no.csv"),
                "--peers",
                str(tmp_path / "no.csv"),
            ]
        )
    assert stop.value.code == 2
    assert "no such file" in capsys.readouterr().err


def test_report_is_written(tmp_path):
    data = tmp_path / "runs.csv"
    pd.DataFrame(
        runs(tools.HEADER, 25, [0.9, 0.8, 0.85]) + runs("peer", 25, [0.7, 0.75, 0.6])
    ).to_csv(data, index=False)
    code = seed_sets.main(
        [
            "--case",
            "k",
            "--header",
            str(data),
            "--peers",
            str(data),
            "--results",
            str(tmp_path),
            "--thresholds",
            "0.8",
        ]
    )
    assert code == 0
    text = (tmp_path / "seed_sets_k.md").read_text()
    assert "| 25 | peer | +0.167 |" in text
    assert "| 25 | 3 | 3 |" in text
