"""T1 search-space descriptions: parameters and conditions, the ``[design] t1`` key, and the
convolution study's own T1 file when ``MLKAPS_GPU_DATA`` is set."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mlkaps_gpu.space import SpaceError, load_t1


def _document(conditions: list[Any] | None = None, **values: Any) -> dict[str, Any]:
    parameters = {
        "bx": "[16, 32, 64]",
        "by": [1, 2],
        "variant": "['a', 'b']",
        "pad": "[True, False]",
    }
    parameters.update(values)
    return {
        "General": {"BenchmarkName": "k"},
        "ConfigurationSpace": {
            "TuningParameters": [
                {"Name": name, "Type": "int", "Values": v} for name, v in parameters.items()
            ],
            "Conditions": [{"Expression": c, "Parameters": []} for c in (conditions or [])],
        },
    }


def _write(folder: Path, document: Any, name: str = "k.T1.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(document))
    return path


def test_parameters_and_translated_conditions(tmp_path: Path):
    conditions = ["bx*by <= 64", "variant in ['a'] or not pad", "pad == True or bx != 64"]
    described = load_t1(_write(tmp_path, _document(conditions)))
    assert [p.name for p in described.parameters] == ["bx", "by", "variant", "pad"]
    assert [p.kind for p in described.parameters] == ["int", "int", "categorical", "bool"]
    assert described.parameters[0].values == (16, 32, 64)
    assert described.constraints == (
        "bx * by <= 64",
        "variant == 'a' or not pad",
        "pad == 1 or bx != 64",
    )
    space = described.space()
    valid = space.valid_design_codes({})
    # every valid configuration satisfies every condition as Python reads it
    table = space.assemble(pd.DataFrame(index=range(len(valid))), valid)
    for row in table.to_dict("records"):
        assert row["bx"] * row["by"] <= 64
        assert row["variant"] == "a" or not row["pad"]
        assert row["pad"] or row["bx"] != 64
    # 3 x 2 x 2 x 2 = 24 configurations; the conditions leave these:
    expected = sum(
        1
        for bx in (16, 32, 64)
        for by in (1, 2)
        for variant in ("a", "b")
        for pad in (True, False)
        if bx * by <= 64 and (variant == "a" or not pad) and (pad or bx != 64)
    )
    assert len(valid) == expected


def test_gzip(tmp_path: Path):
    path = tmp_path / "k.T1.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_document(["bx <= 32"])).encode()))
    assert load_t1(path).constraints == ("bx <= 32",)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1], r"not a T1 description \(no 'ConfigurationSpace'"),
        ({"ConfigurationSpace": {"TuningParameters": []}}, "TuningParameters is not a non-empty"),
        (_document(bx="__import__('os')"), r"TuningParameters\[0\] \(bx\): 'Values'.*not a list"),
        (_document(bx="16"), r"\[0\] \(bx\): 'Values' must be a list"),
        (_document(by=[1, "x"]), r"\[1\] \(by\).*all ints"),
        (_document(["open('f').read()"]), r"Conditions\[0\] \"open\('f'\)\.read\(\)\""),
        (_document(["bz < 3"]), r"Conditions\[0\] 'bz < 3'.*bz"),
        (_document([3]), r"Conditions\[0\]: needs an 'Expression' string"),
    ],
)
def test_errors_name_the_file_and_the_entry(tmp_path: Path, document: Any, message: str):
    with pytest.raises(SpaceError, match=message) as caught:
        load_t1(_write(tmp_path, document))
    assert "k.T1.json" in str(caught.value)


def test_unreadable_files(tmp_path: Path):
    with pytest.raises(SpaceError, match="no such file"):
        load_t1(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SpaceError, match="bad.json: not readable JSON"):
        load_t1(tmp_path / "bad.json")


# ------------------------------------------------------------------------ the config key
CONFIG = """
[campaign]
name = "c"
[kernel]
executor = "replay"
format = "csv"
design_columns = ["bx", "by"]
files = "t.csv"
[design]
constraints = ["by >= 1"]
t1 = "{t1}"
[objectives]
time = "minimize"
[sampling]
budget = 4
"""


def _csv(folder: Path) -> None:
    rows = [f"{bx},{by},{bx * by / 10}" for bx in (16, 32, 64) for by in (1, 2)]
    (folder / "t.csv").write_text("bx,by,time\n" + "\n".join(rows) + "\n")


def test_the_design_t1_key_adds_the_conditions(tmp_path: Path):
    from mlkaps_gpu.campaign import parse_config, prepare

    _csv(tmp_path)
    sub = tmp_path / "space"
    sub.mkdir()
    _write(sub, _document(["bx*by <= 64"], variant="['a']", pad="[True]"))
    text = CONFIG.format(t1="space/k.T1.json")  # relative to the configuration file
    config = parse_config(text, path=tmp_path / "c.toml", label="c.toml")
    assert config.constraints == ["by >= 1", "bx * by <= 64"]
    space = prepare(config).space
    assert len(space.valid_design_codes({})) == 5  # (64, 2) is excluded


@pytest.mark.parametrize(
    ("t1", "message"),
    [
        ("missing.json", r"c\.toml: \[design\] t1.*missing\.json: no such file"),
        ("${MLKAPS_NO_SUCH_VARIABLE}/k.json", "environment variable MLKAPS_NO_SUCH_VARIABLE"),
        ("bad.T1.json", r"\[design\] t1.*bad\.T1\.json: ConfigurationSpace\.Conditions\[0\]"),
    ],
)
def test_the_design_t1_key_refuses_what_it_cannot_read(tmp_path: Path, t1: str, message: str):
    from mlkaps_gpu.campaign import ConfigError, parse_config

    _csv(tmp_path)
    _write(tmp_path, _document(["bx.bit_length() < 3"]), name="bad.T1.json")
    with pytest.raises(ConfigError, match=message):
        parse_config(CONFIG.format(t1=t1), path=tmp_path / "c.toml", label="c.toml")


def test_the_convolution_study_t1_gives_the_replay_config_constraints():
    root = os.environ.get("MLKAPS_GPU_DATA")
    folder = Path(root or "") / "convolution_6gpu"
    if not root or not (folder / "convolution_milo.T1.json").is_file():
        pytest.skip("MLKAPS_GPU_DATA is not set or lacks the convolution data")
    from mlkaps_gpu.executors import load_kernel_tuner_cache

    described = load_t1(folder / "convolution_milo.T1.json")
    cache = load_kernel_tuner_cache(folder / "A100.json.gz")
    assert [p.name for p in described.parameters] == list(cache.keys)
    assert {p.name: list(p.values or ()) for p in described.parameters} == cache.tune_params
    # every configuration the study measured, and only those, satisfies its T1 conditions
    assert len(described.space().valid_design_codes({})) == len(cache.records) == 4362
