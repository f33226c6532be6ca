"""``mlkaps-gpu demo``: people read its output (short aligned lines, the measured gain over a
fixed default), machines read ``--json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlkaps_gpu.cli import main


def test_demo_prints_short_lines_and_the_measured_speedup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # paths in the output are the user's: keep them short here
    out = Path("demo")
    assert main(["demo", "--budget", "30", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert all(len(line) <= 120 for line in lines), max(lines, key=len)
    assert "measured against a fixed default (block=32, order=ijk)" in text
    gain = [line for line in lines if line.startswith("the header's choices are")]
    assert len(gain) == 1 and "faster than the default" in gain[0]
    for n in (48, 200, 500):
        assert any(line.strip().startswith(f"n={n} ") for line in lines)
    for stage in ("sampling:", "modeling:", "optimization:", "trees:"):
        assert any(line.startswith(stage) for line in lines)
    assert (out / "report.html").is_file()
    # machine output: every line is a JSON object, the speed-ups included
    assert main(["--json", "demo", "--budget", "30", "--out", str(out)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    speedups = next(r["speedups"] for r in records if "speedups" in r)
    assert [row["n"] for row in speedups] == [48, 200, 500]
    assert all(row["speedup"] > 0 for row in speedups)
