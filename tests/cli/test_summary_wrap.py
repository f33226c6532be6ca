"""``tune``'s stage summaries and warnings fit the terminal: wrapped at words, never cut."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from mlkaps_gpu.cli import _summary as summary
from mlkaps_gpu.cli import main
from mlkaps_gpu.cli._summary import (
    PIPE_WIDTH,
    WARNING_PREFIX,
    interference_warnings,
    stage_line,
    wrap,
)

TREES = {
    "mode": "joint",
    "depth": 10,
    "leaves": {"joint": 183},
    "header": "convolution.h",
    "verified_inputs": 20015,
    "mismatches": 0,
    "measured_regret": {"mean": 0.01234, "max": 0.2},
}


def words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize("width", [40, 60, 80, 118])
def test_stage_line_wraps_at_words_within_the_width(width: int) -> None:
    text = stage_line("trees", TREES, width=width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines)
    # nothing cut: the words are those of the unwrapped line, "measured regret mean 1.2%" whole
    assert words(text) == words(stage_line("trees", TREES, width=10_000))
    assert "regret mean 1.2%" in " ".join(words(text)) and "..." not in text
    assert lines[0].startswith("trees:        joint tree")
    assert all(line.startswith(" " * 14) and line[14] != " " for line in lines[1:])
    assert (len(lines) > 1) == (width < len(stage_line("trees", TREES, width=10_000)))


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_width_comes_from_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout", Terminal())
    monkeypatch.setenv("COLUMNS", "50")
    lines = stage_line("trees", TREES).splitlines()
    assert len(lines) > 2 and max(len(line) for line in lines) <= 50


def test_off_a_terminal_summaries_keep_118_columns_and_warnings_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Piped to a file or a log, whatever COLUMNS says (a child of a process that loaded
    readline inherits COLUMNS without a terminal): summaries wrapped at words to 118 columns,
    each warning on one line."""
    monkeypatch.setenv("COLUMNS", "50")
    monkeypatch.setattr("sys.stdout", io.StringIO())
    monkeypatch.setattr("sys.stderr", io.StringIO())
    long = {**TREES, "header": "a_header_with_a_rather_long_prefix_for_this_library.h"}
    text = stage_line("trees", long)
    assert len(text) > PIPE_WIDTH and "\n" in text
    assert all(len(line) <= PIPE_WIDTH for line in text.splitlines())
    assert words(text) == words(stage_line("trees", long, width=10_000))
    record = {
        "sustained": True,
        "disturbed": 6,
        "measurements": 6,
        "share": 1.0,
        "median_other_cores": 1.0,
        "threshold_cores": 0.5,
    }
    (warning,) = interference_warnings(record)
    assert "\n" not in warning and len(warning) > 118


def test_a_word_longer_than_the_line_stays_whole() -> None:
    long = "x" * 70
    assert wrap(f"a {long} b", width=40).splitlines() == ["a", long, "b"]


def test_interference_warnings_leave_room_for_the_prefix() -> None:
    record = {
        "sustained": True,
        "disturbed": 60,
        "measurements": 60,
        "share": 1.0,
        "median_other_cores": 1.01,
        "threshold_cores": 0.5,
        "answers_on_disturbed": 15,
        "answers": 16,
        "points": [{"n": n} for n in range(32, 48)],
    }
    warnings = interference_warnings(record, width=72)
    assert len(warnings) == 2
    for warning in warnings:
        printed = f"{WARNING_PREFIX}{warning}".splitlines()
        assert len(printed) > 1 and all(len(line) <= 72 for line in printed)
    assert "and 8 more" in " ".join(words(warnings[1]))


def test_tune_prints_no_line_wider_than_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.campaign.test_table_replay import config_text, shapes_table

    table = tmp_path / "shapes.csv"
    shapes_table(n_points=20).to_csv(table, index=False)
    config = tmp_path / "case.toml"
    config.write_text(config_text(table, method="random", budget=40), encoding="utf-8")
    monkeypatch.setattr(summary, "terminal_width", lambda: 64)  # a terminal 64 wide
    monkeypatch.chdir(tmp_path)  # "header: run/table.h", not a long temporary path
    assert main(["tune", str(config), "--out", "run"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("trees:") for line in lines)
    assert all(len(line) <= 64 for line in lines), [line for line in lines if len(line) > 64]
