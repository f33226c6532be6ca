"""experiments/pass_replays.py: the header tuned on a replay of each pass of a truth and scored
on the other passes, with a setting applied to every campaign."""

from __future__ import annotations

import tomllib

import numpy as np
import pandas as pd
import pytest

from tests.experiments._scripts import load_benchkit, load_script

load_script("bench_inputs")  # pass_replays imports it, as it does when run from experiments/
replays = load_script("pass_replays")
project = load_benchkit("inputs_project")


def small_demo(points: list[int]) -> object:
    problem = project.demo_problem(len(points))
    problem.points = pd.DataFrame({"n": points})
    problem.config["sampling"]["budget"] = 40
    return problem


def two_pass_truth(problem: object) -> pd.DataFrame:
    """Block n / 4 is best at every n; pass 1 is pass 0 with 10 % noise."""
    setup = project._prepared(problem, for_truth=False)
    cells = project.valid_cells(problem, setup.space)
    setup.executor.close()
    ratio = np.log2(cells["block"] / (cells["n"] / 4.0))
    cells["time_pass0"] = (1.0 + ratio**2) * (1.0 + 0.1 * (cells["order"] != "ijk"))
    noise = np.random.default_rng(0).uniform(1.0, 1.1, len(cells))
    cells["time_pass1"] = cells["time_pass0"] * noise
    cells["time"] = cells[["time_pass0", "time_pass1"]].min(axis=1)
    return cells


def demo_case(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """The small demo as the ``demo`` case, its two-pass truth and the truth's CSV."""
    problem = small_demo([32, 64, 128, 256])
    cells = two_pass_truth(problem)
    truth_csv = tmp_path / "truth.csv"
    cells.to_csv(truth_csv, index=False)
    monkeypatch.setitem(replays.PROBLEMS, "demo", lambda: problem)
    return problem, cells, truth_csv


def test_each_pass_is_a_table_scored_on_the_others(tmp_path, monkeypatch):
    """One row per (pass, seed), each campaign replaying its own pass with the --set applied,
    each scored on the other pass; the summary and the written files say which variant."""
    problem, cells, truth_csv = demo_case(tmp_path, monkeypatch)
    rows = replays.run_case(
        "demo", [1], ["trees.max_configs=1"], "one config", tmp_path / "work", truth_csv
    )
    assert list(rows["table"]) == ["time_pass0", "time_pass1"]
    assert (rows["label"] == "one config").all()
    assert ((rows["geomean"] > 0.0) & (rows["geomean"] <= 1.0)).all()
    for table_pass in ("time_pass0", "time_pass1"):
        config = tomllib.loads(
            (tmp_path / "work" / table_pass / problem.name / "truth_replay_s1.toml").read_text()
        )
        assert config["trees"]["max_configs"] == 1
        replayed = pd.read_csv(tmp_path / "work" / table_pass / problem.name / "truth_table.csv")
        assert np.allclose(replayed["time"].to_numpy(), cells[table_pass].to_numpy())
    # beside each header, a plain LightGBM argmin on the same campaign's samples
    assert ((rows["own_samples_model"] > 0.0) & (rows["own_samples_model"] <= 1.0)).all()
    assert (rows["own_samples_model_below_0.67"] >= 0.0).all()
    summary = replays.summarize(rows)
    assert summary["runs"].tolist() == [2]
    gap = (rows["geomean"] - rows["own_samples_model"]).to_numpy()
    assert np.isclose(summary["gap"].iloc[0], gap.mean())
    assert np.isclose(summary["lowest gap"].iloc[0], gap.min())
    assert "| demo | one config | 2 |" in replays.markdown(summary)
    # beside it, the replayed table's own optimum scored on the other pass, and the header's
    # points slow on the scoring pass that the table finds slow too
    fractions = load_benchkit("inputs_truth").point_fractions
    for row in rows.itertuples():
        table, truth, _ = project.table_and_scoring(problem, cells, row.table)
        best = fractions(truth, table.best_config())
        assert np.isclose(row.table_optimum, np.exp(np.log(best).mean()))
    assert (rows["below_0.67_on_table_too"] <= rows["below_0.67"]).all()
    assert np.isclose(summary["table optimum"].iloc[0], rows["table_optimum"].mean())


def test_the_summary_counts_the_runs_more_than_002_below_the_model_on_their_samples():
    rows = pd.DataFrame(
        {
            "case": ["lu"] * 3,
            "label": ["x"] * 3,
            "geomean": [0.95, 0.90, 0.97],
            "own_samples_model": [0.96, 0.93, 0.96],
            "worst": [0.8, 0.7, 0.9],
            "below_0.67": [0.0, 0.0, 0.0],
            "own_samples_model_below_0.67": [0.0, 0.0, 0.0],
        }
    )
    summary = replays.summarize(rows)
    assert summary["runs > 0.02 below"].tolist() == [1]  # only 0.90 against 0.93
    assert np.isclose(summary["lowest gap"].iloc[0], -0.03)
    assert "| -0.0300 | 1 | 0 | 0 |" in replays.markdown(summary)


def test_the_summary_counts_the_runs_slower_than_15x_where_the_model_is_not():
    """Done when 1 (b): a run counts where the header has a point below 0.67 and the model on
    its samples (the median over its seeds) has none; not where both have one."""
    rows = pd.DataFrame(
        {
            "case": ["lu"] * 4,
            "label": ["x"] * 4,
            "geomean": [0.95] * 4,
            "own_samples_model": [0.95] * 4,
            "worst": [0.6, 0.6, 0.8, 0.8],
            "below_0.67": [2.0, 1.0, 0.0, 0.0],
            "own_samples_model_below_0.67": [0.0, 1.0, 3.0, 0.0],
        }
    )
    summary = replays.summarize(rows)
    assert summary["runs slower than 1.5x where the model is not"].tolist() == [1]
    # rows written before the table's columns: no count of them, no table optimum
    assert replays.markdown(summary).rstrip().endswith("| 0 | 1 | 0 | nan |")
    # the first run's slow point is slow on its table too: a choice, not the table's reading
    summary = replays.summarize(
        rows.assign(**{"below_0.67_on_table_too": [1.0, 1.0, 0.0, 0.0], "table_optimum": 0.9})
    )
    assert summary["of them, slower on the table too"].tolist() == [1]
    assert replays.markdown(summary).rstrip().endswith("| 0 | 1 | 1 | 0.9000 |")
    summary = replays.summarize(
        rows.assign(**{"below_0.67_on_table_too": [0.0, 1.0, 0.0, 0.0], "table_optimum": 0.9})
    )
    assert summary["of them, slower on the table too"].tolist() == [0]


def test_auto_ships_no_more_configurations_than_no_bound(tmp_path, monkeypatch):
    """``[trees] max_configs = "auto"`` goes through a whole campaign: its decisions use at
    most as many distinct configurations as the same campaign without a bound."""
    problem, cells, truth_csv = demo_case(tmp_path, monkeypatch)
    counts = {}
    for value in ("auto", "none"):
        work = tmp_path / value
        replays.run_case("demo", [1], [f'trees.max_configs="{value}"'], value, work, truth_csv)
        optima = pd.read_csv(work / "time_pass0" / problem.name / "truth_replay_s1" / "optima.csv")
        counts[value] = len(optima[["block", "order"]].drop_duplicates())
    assert 1 <= counts["auto"] <= counts["none"]


def test_the_peers_draw_from_the_table_pass_and_are_paired_with_the_header(tmp_path, monkeypatch):
    """With peers, each run's row holds every budgeted peer's geomean on the same scoring pass,
    each peer drawing the campaign's budget from that run's table pass; the peers' table pairs
    the header with each peer run by run."""
    problem, cells, truth_csv = demo_case(tmp_path, monkeypatch)
    rows = replays.run_case(
        "demo", [1], [], "defaults", tmp_path / "work", truth_csv, with_peers=True
    )
    peers = load_benchkit("inputs_peers")
    table, truth, _ = project.table_and_scoring(problem, cells, "time_pass1")
    drawn = peers.peer_answers(table, 40, np.random.default_rng([1, 40]))
    fractions = load_benchkit("inputs_truth").point_fractions
    expected = np.exp(np.log(fractions(truth, drawn["random cells + LightGBM argmin"])).mean())
    column = replays.PEER + "random cells + LightGBM argmin"
    assert np.isclose(rows.loc[rows["table"] == "time_pass1", column].iloc[0], expected)
    text = replays.peers_summary(rows)
    gap = rows["geomean"] - rows[column]
    assert f"| {gap.mean():+.4f} | {gap.min():+.4f} | {int((gap > 0).sum())} of 2 |" in text
    assert replays.peers_summary(rows.drop(columns=[c for c in rows if c.startswith("peer")])) == ""


def test_tables_of_another_session_are_replayed_and_scored_on_every_pass(tmp_path, monkeypatch):
    """``--tables``: each table (the truth's cells, measured at another time) is a campaign's
    replay, scored on the minimum over every pass of the truth; a table of other cells, or
    without a time, is refused with the file named."""
    problem, cells, truth_csv = demo_case(tmp_path, monkeypatch)
    design = ["block", "order"]
    live = cells[["n", *design]].assign(time=cells["time_pass0"] * 1.05)
    path = tmp_path / "live0_table.csv"
    live.to_csv(path, index=False)
    rows = replays.run_case(
        "demo", [1], [], "live", tmp_path / "work", truth_csv, with_peers=True, tables=[path]
    )
    assert list(rows["table"]) == ["live0_table"]
    replayed = pd.read_csv(tmp_path / "work" / "live0_table" / problem.name / "truth_table.csv")
    assert np.allclose(replayed["time"].to_numpy(), live["time"].to_numpy())
    # scored on every pass (the min of both): the peers' answers say so
    peers = load_benchkit("inputs_peers")
    truth = project.truth_of(problem, cells)
    table = project.truth_of(problem, live)
    drawn = peers.peer_answers(table, 40, np.random.default_rng([1, 40]))
    fractions = load_benchkit("inputs_truth").point_fractions
    expected = np.exp(np.log(fractions(truth, drawn["random cells + LightGBM argmin"])).mean())
    assert np.isclose(rows[replays.PEER + "random cells + LightGBM argmin"].iloc[0], expected)
    other = tmp_path / "other.csv"
    live[live["n"] != 32].to_csv(other, index=False)
    with pytest.raises(SystemExit, match="other.csv: its cells are not the truth's"):
        replays.run_case("demo", [1], [], "x", tmp_path / "w2", truth_csv, tables=[other])
    live.drop(columns="time").to_csv(other, index=False)
    with pytest.raises(SystemExit, match="other.csv: no column time"):
        replays.run_case("demo", [1], [], "x", tmp_path / "w3", truth_csv, tables=[other])


def interpolated_log_time(table: pd.DataFrame, row: object) -> float:
    """The log time the small demo's ``table`` (points 32 - 256) gives ``row``'s configuration
    at its ``n``: linear in log n between the points where the configuration is listed."""
    points = (32, 64, 128, 256)
    at = table[(table["block"] == row.block) & (table["order"] == row.order)].set_index("n")
    known = [n for n in points if n in at.index]
    return float(np.interp(np.log(row.n), np.log(known), np.log(at.loc[known, "time"].to_numpy())))


def test_emulate_tunes_the_whole_range_on_a_kernel_interpolated_from_the_table(
    tmp_path, monkeypatch
):
    """``--emulate``: the campaign keeps the case's inputs (its whole range, not the table's
    points) and measures an emulated kernel: at a table point the table's time, between points
    the log time interpolated in log n, each measurement with a noise from the truth's passes;
    the peers draw from the table with one such noise per cell."""
    problem, cells, truth_csv = demo_case(tmp_path, monkeypatch)
    live = cells[["n", "block", "order"]].assign(time=cells["time_pass0"] * 1.05)
    path = tmp_path / "live0_table.csv"
    live.to_csv(path, index=False)
    rows = replays.run_case(
        "demo", [1], [], "em", tmp_path / "work", truth_csv, True, [path], emulate="passes"
    )
    assert list(rows["table"]) == ["live0_table"]
    assert 0.0 < rows["geomean"].iloc[0] <= 1.0
    assert 0.0 < rows[replays.PEER + "random cells + LightGBM argmin"].iloc[0] <= 1.0
    directory = tmp_path / "work" / "live0_table" / problem.name / "live0_table_emulated_s1"
    config = tomllib.loads((directory / "campaign.toml").read_text())
    assert config["kernel"] == {"executor": "python", "function": "emulated_kernel.py:time"}
    assert config["inputs"] == problem.config["inputs"]
    noise = np.load(directory / "noise.npy")
    assert np.allclose(np.sort(noise), np.sort(project.pass_noise(cells)))
    import mlkaps_gpu

    store = mlkaps_gpu.Campaign.open(directory / "campaign").store.load()
    ok = store[store["status"] == "ok"]
    assert len(ok) == 40 and not ok["n"].isin([32, 64, 128, 256]).all()
    # each time is the interpolation times a noise the truth's passes measured
    for row in ok.head(10).itertuples():
        expected = interpolated_log_time(live, row)
        assert np.min(np.abs(np.log(row.time) - expected - noise)) < 1e-9


def test_emulate_without_tables_emulates_each_pass_scored_on_the_others(tmp_path, monkeypatch):
    """Without ``--tables``, each pass of the truth is an emulated kernel's table; each seed's
    peers draw from that pass with their own seed's noise (not another seed's on top)."""
    problem, cells, truth_csv = demo_case(tmp_path, monkeypatch)
    rows = replays.run_case(
        "demo", [1, 2], [], "em", tmp_path / "work", truth_csv, True, emulate="passes"
    )
    assert list(zip(rows["table"], rows["seed"], strict=True)) == [
        ("time_pass0", 1),
        ("time_pass0", 2),
        ("time_pass1", 1),
        ("time_pass1", 2),
    ]
    written = pd.read_csv(tmp_path / "work" / "time_pass1" / problem.name / "time_pass1_table.csv")
    assert np.allclose(written["time"], cells["time_pass1"])
    peers = load_benchkit("inputs_peers")
    fractions = load_benchkit("inputs_truth").point_fractions
    table, truth, _ = project.table_and_scoring(problem, cells, "time_pass1")
    noisy = replays.noisy_table(table, project.pass_noise(cells), 2)
    drawn = peers.peer_answers(noisy, 40, np.random.default_rng([2, 40]))
    expected = np.exp(np.log(fractions(truth, drawn["random cells + LightGBM argmin"])).mean())
    column = replays.PEER + "random cells + LightGBM argmin"
    assert np.isclose(rows[column].iloc[3], expected)


def test_pass_noise_is_the_pairs_log_ratio_over_root_two():
    cells = pd.DataFrame({"time_pass0": [1.0, 2.0, np.inf], "time_pass1": [2.0, 2.0, 1.0]})
    noise = project.pass_noise(cells)
    assert np.allclose(np.sort(noise), np.sort([np.log(0.5) / np.sqrt(2.0), 0.0]))
    with pytest.raises(ValueError, match="two passes"):
        project.pass_noise(cells[["time_pass0"]])


def test_emulate_none_reads_the_table_without_noise(tmp_path, monkeypatch):
    """``--emulate none``: every measurement at a table point is the table's time."""
    problem, cells, truth_csv = demo_case(tmp_path, monkeypatch)
    live = cells[["n", "block", "order"]].assign(time=cells["time_pass0"] * 1.05)
    path = tmp_path / "live0_table.csv"
    live.to_csv(path, index=False)
    replays.run_case(
        "demo", [2], [], "em", tmp_path / "work", truth_csv, tables=[path], emulate="none"
    )
    directory = tmp_path / "work" / "live0_table" / problem.name / "live0_table_emulated_s2"
    assert np.load(directory / "noise.npy").tolist() == [0.0]
    import mlkaps_gpu

    store = mlkaps_gpu.Campaign.open(directory / "campaign").store.load()
    at_points = store[(store["status"] == "ok") & store["n"].isin([32, 64, 128, 256])]
    merged = at_points.merge(live, on=["n", "block", "order"], suffixes=("", "_table"))
    assert len(merged) == len(at_points) > 0
    assert np.allclose(merged["time"], merged["time_table"], rtol=1e-12)


def test_drift_slows_runs_of_successive_measurements_and_never_speeds_one(tmp_path, monkeypatch):
    """``--drift SD,RHO``: on an emulated kernel without noise every measurement reads its
    table time or slower, never faster, and some slower; the slow ones come in runs
    (successive measurements' slowdowns correlate, about half of them are none); the peers'
    cells are slowed independently, never sped up."""
    problem, cells, truth_csv = demo_case(tmp_path, monkeypatch)
    live = cells[["n", "block", "order"]].assign(time=cells["time_pass0"])
    path = tmp_path / "live0_table.csv"
    live.to_csv(path, index=False)
    replays.run_case(
        "demo",
        [3],
        [],
        "em",
        tmp_path / "work",
        truth_csv,
        tables=[path],
        emulate="none",
        drift=(0.3, 0.8),
    )
    directory = tmp_path / "work" / "live0_table" / problem.name / "live0_table_emulated_s3"
    import json

    import mlkaps_gpu

    assert json.loads((directory / "emulated_kernel.json").read_text())["drift"] == [0.3, 0.8]
    store = mlkaps_gpu.Campaign.open(directory / "campaign").store.load()
    ok = store[store["status"] == "ok"]
    # each measurement against the table's interpolated time
    slowdown = [np.log(row.time) - interpolated_log_time(live, row) for row in ok.itertuples()]
    assert len(slowdown) == 40
    assert min(slowdown) >= -1e-9 and max(slowdown) > 0.01
    # the kernel itself, called 2,000 times at one cell of its table
    import importlib.util
    import shutil

    shutil.copy(directory / "emulated_kernel.py", tmp_path / "drifting.py")
    shutil.copy(directory / "emulated_kernel.json", tmp_path / "drifting.json")
    loader = importlib.util.spec_from_file_location("drifting", tmp_path / "drifting.py")
    assert loader is not None and loader.loader is not None
    kernel = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(kernel)
    row = live.iloc[0].to_dict()
    steps = np.log([kernel.time(row) / row["time"] for _ in range(2000)])
    assert steps.min() >= -1e-12
    assert 0.35 < np.mean(steps < 1e-12) < 0.65
    assert np.corrcoef(steps[:-1], steps[1:])[0, 1] > 0.5
    table, _, _ = project.table_and_scoring(problem, cells, "time_pass0")
    slowed = replays.noisy_table(table, np.zeros(1), 3, drift_sd=0.3)
    listed = np.isfinite(table.times)
    ratio = slowed.times[listed] / table.times[listed]
    assert (ratio >= 1.0).all() and (ratio > 1.01).any()
    assert replays.noisy_table(table, np.zeros(1), 3).times[listed].tolist() == (
        table.times[listed].tolist()
    )


def test_drift_is_checked_and_needs_emulate(capsys):
    assert replays.parse_drift("0.3,0.8") == (0.3, 0.8)
    for bad in ("0.3", "a,b", "-1,0.5", "0.3,1"):
        with pytest.raises(replays.argparse.ArgumentTypeError, match="--drift"):
            replays.parse_drift(bad)
    with pytest.raises(SystemExit) as exited:
        replays.main(["--case", "demo", "--drift", "0.3,0.8"])
    assert exited.value.code == 2
    assert "--drift needs --emulate" in capsys.readouterr().err
