"""experiments/paired_seeds.py: a variant against the defaults on the same seeds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.experiments._scripts import load_benchkit, load_script

paired_seeds = load_script("paired_seeds")
tools = load_benchkit("tools")


def rows(values: dict[int, tuple[float, float]], b: int = 25, tool: str | None = None):
    """bench_peers rows: seed -> (fraction at input x, fraction at input y)."""
    return [
        {"tool": tool or tools.HEADER, "case": "k", "b": b, "seed": seed, "input": i, "fraction": v}
        for seed, pair in values.items()
        for i, v in zip(("x", "y"), pair, strict=True)
    ]


def write(path: Path, table: list[dict]) -> Path:
    pd.DataFrame(table).to_csv(path, index=False)
    return path


def test_differences_are_paired_by_seed_and_geomean_over_inputs(tmp_path):
    base = write(tmp_path / "base.csv", rows({0: (0.4, 0.9), 1: (1.0, 1.0), 2: (0.9, 0.9)}))
    variant = write(
        tmp_path / "variant.csv",
        rows({0: (0.9, 0.9), 1: (1.0, 1.0), 2: (0.81, 0.9), 7: (1.0, 1.0)})
        + rows({0: (0.1, 0.1)}, tool=tools.BEST_MEASURED),  # never counted
    )
    table = paired_seeds.paired(
        paired_seeds.header_rows([base], "k"), paired_seeds.header_rows([variant], "k")
    )
    row = table.iloc[0]
    assert row["seeds"] == 3  # seed 7 has no partner
    expected = ((0.9 - 0.6) + 0.0 + ((0.81 * 0.9) ** 0.5 - 0.9)) / 3
    assert row["difference"] == pytest.approx(expected)
    assert (row["better"], row["worse"]) == (1, 1)
    assert row["low"] < row["difference"] < row["high"]


def test_identical_runs_differ_by_nothing(tmp_path):
    table = rows({0: (0.5, 0.7), 1: (0.9, 0.8), 2: (1.0, 0.6)})
    base = paired_seeds.header_rows([write(tmp_path / "a.csv", table)], "k")
    row = paired_seeds.paired(base, base).iloc[0]
    assert row["difference"] == 0.0 and row["wilcoxon_p"] == 1.0
    assert (row["better"], row["worse"]) == (0, 0)


def test_misses_are_counted_per_input_value(tmp_path):
    base = paired_seeds.header_rows(
        [write(tmp_path / "a.csv", rows({0: (0.40, 0.9), 1: (0.41, 0.44)}))], "k"
    )
    variant = paired_seeds.header_rows(
        [write(tmp_path / "b.csv", rows({0: (0.95, 0.9), 1: (0.41, 0.99)}))], "k"
    )
    table = paired_seeds.per_input(base, variant, miss=0.45).set_index("input")
    assert table.loc["x", "misses_base"] == 2 and table.loc["x", "misses_variant"] == 1
    assert table.loc["y", "misses_base"] == 1 and table.loc["y", "misses_variant"] == 0


def test_main_writes_the_report_and_refuses_runs_without_common_seeds(tmp_path, capsys):
    base = write(tmp_path / "a.csv", rows({0: (0.5, 0.5), 1: (0.6, 0.6)}))
    variant = write(tmp_path / "b.csv", rows({0: (0.7, 0.5), 1: (0.6, 0.9)}))
    assert (
        paired_seeds.main(
            [
                "--case",
                "k",
                "--base",
                str(base),
                "--variant",
                str(variant),
                "--name",
                "v",
                "--results",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    text = (tmp_path / "out" / "paired_k_v.md").read_text()
    assert text.startswith("# paired_seeds: k") and "- commit:" in text and "| 25 | 2 |" in text
    other = write(tmp_path / "c.csv", rows({5: (0.7, 0.5)}))
    with pytest.raises(SystemExit) as stop:
        paired_seeds.main(["--case", "k", "--base", str(base), "--variant", str(other)])
    assert stop.value.code == 2
    assert "share no" in capsys.readouterr().err
