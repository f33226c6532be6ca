"""experiments/same_project_rows.py: exact comparison of the project rows of two runs."""

from __future__ import annotations

import math

import pandas as pd

from tests.experiments._scripts import load_script

same = load_script("same_project_rows")


def rows(fraction: float = 0.9, peer: float = 0.5) -> pd.DataFrame:
    common = {"case": "k", "b": 25, "seed": 0, "optimum": 1.0, "n_evaluated": 25}
    return pd.DataFrame(
        [
            common
            | {
                "tool": "project header",
                "input": "A",
                "fraction": fraction,
                "time": 1 / fraction,
                "status": "ok",
            },
            common
            | {
                "tool": "project best measured",
                "input": "A",
                "fraction": 0.0,
                "time": math.nan,
                "status": "none",
            },
            common
            | {"tool": "KT pso", "input": "A", "fraction": peer, "time": 2.0, "status": "ok"},
        ]
    )


def test_same_rows_in_another_order_and_other_peers_are_the_same():
    run = rows(peer=0.1).iloc[::-1]
    assert same.differences(rows(), run).empty  # a failed row's NaN time equals NaN


def test_a_changed_fraction_shows_both_sides():
    changed = same.differences(rows(), rows(fraction=0.8))
    assert list(changed["side"]) == ["reference", "run"]
    assert list(changed["fraction"]) == [0.9, 0.8]


def test_command_line(tmp_path, capsys):
    reference = tmp_path / "before.csv"
    rows().to_csv(reference, index=False)
    folder = tmp_path / "run"
    folder.mkdir()
    assert same.main([str(reference), str(folder)]) == 2  # no bench_peers_*_k.csv
    rows().to_csv(folder / "bench_peers_quick_k.csv", index=False)
    assert same.main([str(reference), str(folder)]) == 0
    rows(fraction=0.5).to_csv(folder / "bench_peers_quick_k.csv", index=False)
    assert same.main([str(reference), str(folder)]) == 1
    assert "2 rows differ" in capsys.readouterr().out
