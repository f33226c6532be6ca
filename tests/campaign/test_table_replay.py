"""Campaigns replaying a table over inputs (issue 39, point 1): only listed (input point,
configuration) rows are sampled, the grid is the recorded points, unlisted rows are invalid to
the decisions, ``select --csv`` answers recorded and unseen shapes, and configuration errors
name the file and the key (exit 2)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign, parse_config
from mlkaps_gpu.cli import main
from mlkaps_gpu.executors import INVALID, OK, TableReplayExecutor, choice_of

METHODS = ("random", "lhs", "hvs", "hvsr", "ga_adaptive", "bayes")
BLOCKS = (16, 32, 64, 128)
WARPS = (2, 4, 8)


def shapes_table(seed: int = 0, n_points: int = 60) -> pd.DataFrame:
    """Shapes (m, n, dtype), each with 4 of the 12 (block, warps) configurations listed; the
    best block grows with m, dtype "b" is 20 % slower; every cell measured twice."""
    rng = np.random.default_rng(seed)
    m = np.unique(np.round(np.geomspace(8, 4096, n_points)).astype(int))
    rows = []
    for index, size in enumerate(m):
        dtype = "a" if index % 2 else "b"
        n = int(rng.choice([256, 1024]))
        configurations = rng.choice(len(BLOCKS) * len(WARPS), size=4, replace=False)
        for configuration in configurations:
            block, warps = BLOCKS[configuration // 3], WARPS[configuration % 3]
            time = (np.log2(block) - np.log2(size) / 2 - 1) ** 2 + 1 + 0.1 * warps
            time *= 1.2 if dtype == "b" else 1.0
            for repeat in (0.99, 1.01):
                rows.append((int(size), n, dtype, block, warps, time * repeat))
    return pd.DataFrame(rows, columns=["m", "n", "dtype", "block", "warps", "runtime"])


def config_text(
    path: Path, *, method: str = "ga_adaptive", budget: int = 60, extra: str = ""
) -> str:
    return f"""
[campaign]
name = "table"
seed = 0

[kernel]
executor = "replay"
format = "csv"
files = "{path}"
input_columns = ["m", "n", "dtype"]
design_columns = ["block", "warps"]
objective_column = "runtime"
{extra}
[objectives]
time = "minimize"

[sampling]
method = "{method}"
budget = {budget}

[trees]
prefix = "table"
verify_inputs = 200
"""


def make_campaign(folder: Path, text: str) -> Campaign:
    config = parse_config(text, path=folder / "case.toml", label="case.toml")
    return Campaign.create_or_resume(config, folder / "run")


@pytest.fixture()
def table_file(tmp_path: Path) -> Path:
    path = tmp_path / "shapes.csv"
    shapes_table().to_csv(path, index=False)
    return path


def listed_keys(executor: TableReplayExecutor) -> set[tuple]:
    rows = executor.listed_rows()
    return set(map(tuple, rows.astype(str).to_numpy().tolist()))


@pytest.mark.parametrize("method", METHODS)
def test_samplers_ask_only_listed_rows(tmp_path: Path, table_file: Path, method: str) -> None:
    campaign = make_campaign(tmp_path, config_text(table_file, method=method, budget=200))
    executor = campaign.setup.executor
    assert isinstance(executor, TableReplayExecutor)
    listed = listed_keys(executor)
    names = [*executor.table.input_names, *executor.table.design_names]
    sampler = campaign.make_sampler()
    for _ in range(4):
        rows = sampler.ask(16)
        keys = set(map(tuple, rows[names].astype(str).to_numpy().tolist()))
        assert keys <= listed, (method, keys - listed)
        results = executor.run(rows)
        assert (results["status"] != INVALID).all()
        sampler.tell(rows, results)
    campaign.close()


def test_space_judges_unlisted_rows_invalid(tmp_path: Path, table_file: Path) -> None:
    campaign = make_campaign(tmp_path, config_text(table_file))
    space = campaign.space
    listed = campaign.setup.executor.listed_rows()
    assert space.is_valid(listed).all()
    # every configuration at the first recorded shape: only the 4 listed are valid
    first = listed.iloc[[0]][["m", "n", "dtype"]]
    everything = first.merge(
        pd.DataFrame([(b, w) for b in BLOCKS for w in WARPS], columns=["block", "warps"]),
        how="cross",
    )
    assert int(space.is_valid(everything).sum()) == 4
    # an unrecorded shape has no valid configuration
    unseen = everything.assign(m=int(first["m"].iloc[0]) + 1)
    assert not space.is_valid(unseen).any()
    grid = campaign.grid()
    assert len(grid) == len(listed[["m", "n", "dtype"]].drop_duplicates())
    repaired = space.repair(everything)
    assert space.is_valid(repaired).all()
    campaign.close()


def every_configuration_at_six_shapes(tmp_path: Path, table_file: Path) -> tuple[Any, Any, Any]:
    """A sampled table campaign, its evidence score, and every (block, warps) at six recorded
    shapes (listed there or not)."""
    campaign = make_campaign(tmp_path, config_text(table_file, budget=40))
    campaign.sample()
    listed = campaign.setup.executor.listed_rows()
    shapes = listed[["m", "n", "dtype"]].drop_duplicates().head(6)
    everything = shapes.merge(
        pd.DataFrame([(b, w) for b in BLOCKS for w in WARPS], columns=["block", "warps"]),
        how="cross",
    )[campaign.space.names]
    return campaign, campaign.evidence_score(), everything


def test_an_unlisted_configuration_is_no_better_than_the_slowest_listed(
    tmp_path: Path, table_file: Path
) -> None:
    """Decision 0045: the trees' score of a configuration a recorded shape does not list is at
    least that of the slowest configuration listed there (how the benchmarks score such an
    answer), without uncertainty; listed ones keep their estimates."""
    campaign, score, everything = every_configuration_at_six_shapes(tmp_path, table_file)
    space = campaign.space
    valid = space.is_valid(everything)
    assert valid.any() and not valid.all()
    mean, uncertainty, _, out = score.estimate(everything)
    pessimistic = score.pessimistic(everything)
    point = everything.groupby(["m", "n", "dtype"], sort=False).ngroup().to_numpy()
    for at in np.unique(point):
        mine = point == at
        slowest = pessimistic[mine & valid & ~out].max()
        assert np.all(pessimistic[mine & ~valid] >= slowest - 1e-12)
    assert np.all(uncertainty[~valid] == 0.0)
    assert np.all(uncertainty[valid & ~out] > 0.0)
    campaign.close()


def test_listed_and_unlisted_rows_of_one_table_are_each_predicted_once(
    tmp_path: Path, table_file: Path
) -> None:
    """The slowest listed configuration of decision 0045 reads the listed rows' own estimates:
    in one table with listed and unlisted rows (the trees' score of a leaf), and in a later
    table, no row is predicted twice."""
    campaign, score, everything = every_configuration_at_six_shapes(tmp_path, table_file)
    score.surprises(everything)  # the measured rows' residuals, predicted once beforehand
    predicted: list[int] = []
    model = score.model
    original = model.predict_log

    def counting(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        predicted.append(len(features))
        return original(features)

    model.predict_log = counting  # type: ignore[method-assign]
    score.estimate(everything)
    assert sum(predicted) == len(everything)
    score.estimate(everything.iloc[::-1])
    assert sum(predicted) == len(everything)
    campaign.close()


@pytest.mark.compiler
def test_table_campaign_end_to_end_and_select(
    tmp_path: Path, table_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    campaign = make_campaign(tmp_path, config_text(table_file, budget=80))
    campaign.run()
    executor = campaign.setup.executor
    listed = listed_keys(executor)
    names = [*executor.table.input_names, *executor.table.design_names]
    stored = campaign.store.load()
    assert len(stored) == 80
    sampled = stored.iloc[: campaign.sampling_budget]
    assert set(map(tuple, sampled[names].astype(str).to_numpy().tolist())) <= listed
    assert (sampled["status"] == OK).all()
    # the confirmation measures the trees' answers: one unlisted at its point is a recorded
    # failure (invalid, no value), never a number
    unlisted = executor.cells(stored) < 0
    assert (stored.loc[unlisted, "status"] == INVALID).all()
    assert stored.loc[unlisted, "time"].isna().all()
    optima = campaign.load_optima()
    assert len(optima) == len(campaign.grid())
    # the decisions ship a listed configuration at every recorded shape
    assert set(map(tuple, optima[names].astype(str).to_numpy().tolist())) <= listed
    campaign.close()

    shapes = tmp_path / "ask.csv"
    recorded = shapes_table()[["m", "n", "dtype"]].drop_duplicates().head(5)
    unseen = pd.DataFrame({"m": [3, 5000, 100], "n": [256, 1024, 700], "dtype": ["a", "b", "a"]})
    pd.concat([recorded, unseen]).to_csv(shapes, index=False)
    assert main(["select", str(tmp_path / "run"), "--csv", str(shapes)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == "m,n,dtype,block,warps" and len(out) == 1 + 8
    answered = [line.split(",") for line in out[1:]]
    assert all(int(row[3]) in BLOCKS and int(row[4]) in WARPS for row in answered)
    # a dtype the data never had is refused, naming it (exit 2)
    pd.DataFrame({"m": [64], "n": [256], "dtype": ["c"]}).to_csv(shapes, index=False)
    assert main(["select", str(tmp_path / "run"), "--csv", str(shapes)]) == 2
    assert "dtype" in capsys.readouterr().err
    # --as-choice needs data that names its choices
    assert main(["select", str(tmp_path / "run"), "m=64", "n=256", "dtype=a", "--as-choice"]) == 2
    assert "--as-choice" in capsys.readouterr().err


def write_autoheuristic(path: Path) -> Path:
    """A small AutoHeuristic-format file: 30 shapes x (extern + 3 Triton choices), 3 repeats."""
    metadata = {"numerical_features": ["m", "k"], "categorical_features": ["mat1_dtype"]}
    choices = [
        "extern_fallback_mixed_mm",
        "type=triton_BLOCK-M=16_BLOCK-K=32_BLOCK-N=64_numstages=2_numwarps=4",
        "type=triton_BLOCK-M=64_BLOCK-K=64_BLOCK-N=128_numstages=3_numwarps=4",
        "type=triton_BLOCK-M=128_BLOCK-K=64_BLOCK-N=128_numstages=4_numwarps=8",
    ]
    lines = [json.dumps(metadata), "m,k,mat1_dtype,choice,feedback"]
    for m in np.unique(np.round(np.geomspace(1, 512, 30)).astype(int)):
        for k in (1024, 4096):
            for index, choice in enumerate(choices):
                best = min(3, int(np.log2(m) // 3))
                time = 1.0 + abs(index - best) * 0.3
                for repeat in (1.0, 1.02, 0.98):
                    lines.append(f"{m},{k},torch.float16,{choice},{time * repeat * k / 1024}")
    path.write_bytes("\n".join(lines).encode() + b"\n")
    return path


def autoheuristic_config(data: Path, name: str, *, seed: int, budget: int) -> str:
    """A campaign replaying the AutoHeuristic file ``data`` as it is (``name`` also the
    header's prefix)."""
    return f"""
[campaign]
name = "{name}"
seed = {seed}

[kernel]
executor = "replay"
format = "autoheuristic"
files = "{data}"

[objectives]
time = "minimize"

[sampling]
budget = {budget}

[trees]
prefix = "{name}"
verify_inputs = 200
"""


@pytest.mark.compiler
def test_autoheuristic_campaign_names_its_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_autoheuristic(tmp_path / "mm.txt")
    campaign = make_campaign(tmp_path, autoheuristic_config(data, "ah", seed=1, budget=60))
    campaign.run()
    assert campaign.space.design_names[0] == "kind"
    campaign.close()
    shapes = tmp_path / "ask.csv"
    pd.DataFrame(
        {"m": [2, 300, 7000], "k": [1024, 4096, 50], "mat1_dtype": ["torch.float16"] * 3}
    ).to_csv(shapes, index=False)
    assert main(["select", str(tmp_path / "run"), "--csv", str(shapes), "--as-choice"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert len(table) == 3 and "choice" in table.columns
    design = table.drop(columns=["m", "k", "mat1_dtype", "choice"])
    assert table["choice"].tolist() == [choice_of(row) for row in design.to_dict("records")]
    assert set(table["choice"]) <= {
        "extern_fallback_mixed_mm",
        *[c for c in open(data).read().split(",") if c.startswith("type=triton")],
    }


@pytest.mark.compiler
def test_autoheuristic_campaign_without_triton_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file whose choices are all other than Triton configurations (as AutoHeuristic's
    pad_mm data: ``orig`` or ``pad``) tunes unchanged: ``kind`` is the only design parameter,
    and the header answers the data's own choice names, the faster one on each side."""
    metadata = {"numerical_features": ["m", "k"], "categorical_features": ["dtype"]}
    lines = [json.dumps(metadata), "m,k,dtype,choice,feedback"]
    for m in np.unique(np.round(np.geomspace(2, 8192, 30)).astype(int)):
        for k in (1000, 4000):
            for choice in ("orig", "pad"):
                # padding pays from m = 256 on, by 1.5x either side of it
                faster = (choice == "pad") == (m >= 256)
                for repeat in (1.0, 1.02, 0.98):
                    time = (1.0 if faster else 1.5) * repeat * k / 1000
                    lines.append(f"{m},{k},torch.float16,{choice},{time}")
    data = tmp_path / "pad_mm.txt"
    data.write_text("\n".join(lines) + "\n")
    campaign = make_campaign(tmp_path, autoheuristic_config(data, "pad", seed=2, budget=40))
    campaign.run()
    assert campaign.space.design_names == ["kind"]
    campaign.close()
    shapes = tmp_path / "ask.csv"
    pd.DataFrame(
        {"m": [3, 20, 2000, 8000], "k": [1000, 4000, 1000, 4000], "dtype": ["torch.float16"] * 4}
    ).to_csv(shapes, index=False)
    assert main(["select", str(tmp_path / "run"), "--csv", str(shapes), "--as-choice"]) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert table["choice"].tolist() == ["orig", "orig", "pad", "pad"]


# ------------------------------------------------------------------------------ config errors
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('aggregate = "mode"', "[kernel] aggregate"),
        ('input_columns = ["m", "block"]', "'block' is also in design_columns"),
        ('input_columns = ["m", "int"]', "[kernel] input_columns[1]"),
    ],
)
def test_bad_table_keys(
    tmp_path: Path, table_file: Path, extra: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = config_text(table_file).replace('input_columns = ["m", "n", "dtype"]\n', "")
    path = tmp_path / "bad.toml"
    path.write_text(text.replace("[objectives]", extra + "\n[objectives]"))
    assert main(["check", str(path)]) == 2
    error = capsys.readouterr().err
    assert "bad.toml" in error and message in error, error


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("[objectives]", '[inputs]\nq = { type = "int", range = [1, 4] }\n[objectives]'),
            "[inputs] q: a table replay takes its inputs",
        ),
        (("[trees]", "[optimization]\ngrid = 8\n[trees]"), "[optimization] grid"),
        (('format = "csv"', 'format = "kernel_tuner"'), 'applies only to format = "csv"'),
        (('design_columns = ["block", "warps"]', ""), "design_columns"),
        (('"m", "n", "dtype"', '"m", "size", "dtype"'), "missing column(s) 'size'"),
    ],
)
def test_table_config_errors(
    tmp_path: Path,
    table_file: Path,
    change: tuple[str, str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(config_text(table_file).replace(*change))
    assert main(["check", str(path)]) == 2
    error = capsys.readouterr().err
    assert "bad.toml" in error and message in error, error


def test_files_mapping_is_refused_for_a_table(tmp_path: Path, table_file: Path, capsys) -> None:
    text = config_text(table_file).replace(
        f'files = "{table_file}"', f'files = {{ gpu = {{ A = "{table_file}" }} }}'
    )
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    assert "[kernel] files" in capsys.readouterr().err


# -------------------------------------------------------------------------------- real data
@pytest.mark.slow
@pytest.mark.compiler
def test_real_flexattention_campaign(tmp_path: Path) -> None:
    root = os.environ.get("MLKAPS_GPU_DATA")
    data = Path(root or "") / "autoheuristic" / "flexattention_a100.txt.gz"
    if not root or not data.is_file():
        pytest.skip("MLKAPS_GPU_DATA does not hold autoheuristic/flexattention_a100.txt.gz")
    config = (
        Path(__file__).parents[2] / "experiments" / "configs" / "flexattention_a100_replay.toml"
    )
    from mlkaps_gpu.campaign import load_config

    campaign = Campaign.create_or_resume(load_config(config), tmp_path / "run")
    campaign.run()
    stored = campaign.store.load()
    assert len(stored) == 991
    assert (stored.iloc[: campaign.sampling_budget]["status"] != INVALID).all()
    assert len(campaign.grid()) == 6195
    campaign.close()
