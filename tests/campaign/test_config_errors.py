"""Bad configurations: exit status 2, one line naming file, key and problem, nothing written."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from mlkaps_gpu.cli._main import main

GOOD = """\
[kernel]
executor = "python"
function = "math:hypot"

[inputs]
n = { type = "int", range = [16, 1024] }

[design]
block = { type = "int", values = [8, 16, 32] }
constraints = ["block <= n"]

[sampling]
budget = 10
"""


def _variant(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


CASES = {
    "unknown_type": (
        _variant('n = { type = "int"', 'n = { type = "integer"'),
        ["[inputs] n.type", '"integer"', "must be one of"],
    ),
    "min_greater_than_max": (
        _variant("range = [16, 1024]", "range = [1024, 16]"),
        ["[inputs] n", "min 1024 > max 16"],
    ),
    "empty_values": (
        _variant("values = [8, 16, 32]", "values = []"),
        ["[design] block", "empty value list"],
    ),
    "duplicate_name_across_sections": (
        _variant('block = { type = "int", values', 'n = { type = "int", values'),
        ["[design] n", "duplicate name (also in [inputs])"],
    ),
    "duplicate_key_in_section": (
        _variant("[design]\n", '[design]\nblock = { type = "int", values = [1] }\n'),
        ["line", "'block'", "defined twice"],
    ),
    "unknown_parameter_in_constraint": (
        _variant('"block <= n"', '"block <= m"'),
        ["[design] constraints[0]", "unknown parameter 'm'"],
    ),
    "attribute_access": (
        _variant('"block <= n"', '"block.__class__ == 1"'),
        ["constraints[0]", "attribute access", "block.__class__"],
    ),
    "import_call": (
        _variant('"block <= n"', "\"__import__('os')\""),
        ["constraints[0]", "__import__"],
    ),
    "subscript": (
        _variant('"block <= n"', '"block[0] <= n"'),
        ["constraints[0]", "subscript", "block[0]"],
    ),
    "unsatisfiable": (
        _variant('"block <= n"', '"block > 2 * n + 5000"'),
        ["[design] constraints", "no configuration satisfies"],
    ),
    "non_positive_budget": (
        _variant("budget = 10", "budget = 0"),
        ["[sampling] budget", "must be an integer from 1 to"],
    ),
    "unknown_key": (
        _variant("budget = 10", "budget = 10\nbudgett = 3"),
        ["[sampling] budgett", "unknown key"],
    ),
}


def _run(config: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["--quiet", "tune", str(config), "--out", str(out)])
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_config_exits_2_with_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = CASES[case]
    config = tmp_path / "bad.toml"
    config.write_text(text)
    out = tmp_path / "campaign"
    code, err = _run(config, out, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "bad.toml" in lines[0]
    for fragment in expected:
        assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in err
    assert not out.exists()


def test_good_config_is_accepted(tmp_path: Path) -> None:
    from mlkaps_gpu.campaign import parse_config
    from mlkaps_gpu.campaign._setup import prepare

    config = parse_config(GOOD, path=tmp_path / "good.toml", label="good.toml")
    setup = prepare(config)
    assert setup.space.design_names == ["block"]


REPLAY = """\
[kernel]
executor = "replay"
files = {{ gpu = {{ A = "{a}", B = "{b}" }} }}

[design]
constraints = []

[sampling]
budget = 10
"""


def _cache_text() -> str:
    return (
        '{"device_name": "X", "kernel_name": "k", "problem_size": [1], '
        '"tune_params_keys": ["bx"], "tune_params": {"bx": [1, 2]}, "objective": "time", '
        '"cache": {"1": {"bx": 1, "time": 1.0}, "2": {"bx": 2, "time": 0.5}}}'
    )


def test_missing_replay_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "a.json"
    good.write_text(_cache_text())
    config = tmp_path / "replay.toml"
    config.write_text(REPLAY.format(a=good, b=tmp_path / "missing.json.gz"))
    out = tmp_path / "campaign"
    code, err = _run(config, out, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "replay.toml" in err and "files.gpu.B" in err and "not found" in err
    assert not out.exists()


def test_corrupt_cache_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "a.json"
    good.write_text(_cache_text())
    corrupt = tmp_path / "b.json.gz"
    corrupt.write_bytes(gzip.compress(b'{"cache": {"1": ')[:-6])
    config = tmp_path / "replay.toml"
    config.write_text(REPLAY.format(a=good, b=corrupt))
    out = tmp_path / "campaign"
    code, err = _run(config, out, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "replay.toml" in err and "[kernel] files" in err and "b.json.gz" in err
    assert not out.exists()


def test_replay_config_with_env_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlkaps_gpu.campaign import parse_config
    from mlkaps_gpu.campaign._setup import prepare

    (tmp_path / "a.json").write_text(_cache_text())
    (tmp_path / "b.json").write_text(_cache_text())
    monkeypatch.setenv("TOY_DATA", str(tmp_path))
    text = REPLAY.format(a="${TOY_DATA}/a.json", b="${TOY_DATA}/b.json")
    setup = prepare(parse_config(text, path=tmp_path / "r.toml", label="r.toml"))
    assert setup.space.input_names == ["gpu"]
    assert setup.space.design_names == ["bx"]
    rows = setup.space.sample_valid(4, np.random.default_rng(0))
    result = setup.executor.run(rows)
    assert set(result["time"]) <= {1.0, 0.5}
