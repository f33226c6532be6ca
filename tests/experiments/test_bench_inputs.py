"""experiments/bench_inputs.py: the score at every input point, the peers on small synthetic
tables (no timing, no data), and a ``--quick`` run on a synthetic AutoHeuristic file."""

from __future__ import annotations

import argparse
import gzip
import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from tests.experiments._scripts import load_benchkit, load_script

bench = load_script("bench_inputs")
truth_module = load_benchkit("inputs_truth")
peers = load_benchkit("inputs_peers")
project = load_benchkit("inputs_project")
Truth = truth_module.Truth


def make_truth(times: np.ndarray, xs: np.ndarray | None = None) -> Truth:
    times = np.asarray(times, dtype=float)
    xs = np.arange(1, times.shape[0] + 1) * 10 if xs is None else xs
    return Truth(
        name="synthetic",
        inputs=pd.DataFrame({"x": xs}),
        configs=pd.DataFrame({"c": np.arange(times.shape[1])}),
        labels=[f"c={i}" for i in range(times.shape[1])],
        times=times,
        numeric_inputs=["x"],
        categorical_inputs=[],
    )


def switching_truth(points: int = 40) -> Truth:
    """Config 0 is best below x = 200, config 1 above, config 2 never (2x the best)."""
    xs = np.unique(np.round(np.geomspace(10, 1000, points)).astype(int))
    fast, slow = xs / 100.0, xs / 50.0
    small = xs < 200
    times = np.column_stack(
        [np.where(small, fast, 3 * slow), np.where(small, 3 * slow, fast), 2 * fast]
    )
    return make_truth(times, xs)


# ------------------------------------------------------------------------------ scoring
def test_point_fractions_unlisted_failed_and_missing_answers_score_as_slowest():
    times = np.array(
        [
            [1.0, 2.0, 4.0],
            [2.0, np.inf, 8.0],  # config 1 failed here
            [np.nan, 3.0, 6.0],  # config 0 not listed here
        ]
    )
    truth = make_truth(times)
    assert truth.optimum.tolist() == [1.0, 2.0, 3.0]
    assert truth.slowest.tolist() == [4.0, 8.0, 6.0]
    fractions = truth_module.point_fractions(truth, np.array([1, 1, 0]))
    np.testing.assert_allclose(fractions, [0.5, 0.25, 0.5])
    fractions = truth_module.point_fractions(truth, np.array([-1, 0, 1]))
    np.testing.assert_allclose(fractions, [0.25, 1.0, 1.0])


def test_summarize_fractions_geomean_worst_and_counts():
    summary = truth_module.summarize_fractions(np.array([1.0, 0.25, 0.8, 0.95]))
    assert summary["geomean"] == pytest.approx((1.0 * 0.25 * 0.8 * 0.95) ** 0.25)
    assert summary["worst"] == 0.25
    assert summary["below_0.67"] == 1
    assert summary["below_0.9"] == 2


def test_truth_drops_points_where_nothing_ran_and_checks_shape():
    truth = make_truth(np.array([[1.0, 2.0], [np.inf, np.nan], [3.0, 1.0]]))
    assert truth.n_points == 2
    assert truth.inputs["x"].tolist() == [10, 30]
    with pytest.raises(ValueError, match="shape"):
        Truth(
            "t",
            pd.DataFrame({"x": [1]}),
            pd.DataFrame({"c": [0]}),
            ["c"],
            np.ones((2, 1)),
            ["x"],
            [],
        )


def test_truth_from_cells_and_config_index():
    cells = pd.DataFrame(
        {
            "n": [32, 32, 64, 64, 64],
            "block": [8, 16, 8, 16, 32],
            "order": ["ijk", "ijk", "ijk", "ijk", "ikj"],
            "time": [1.0, 0.5, 4.0, np.nan, 2.0],
        }
    )
    truth = truth_module.truth_from_cells(
        cells, name="t", numeric_inputs=["n"], categorical_inputs=[], design=["block", "order"]
    )
    assert truth.times.shape == (2, 3)
    assert np.isnan(truth.times[0, 2])  # (32, block 32) is not listed
    assert np.isinf(truth.times[1, 1])  # a NaN time is a failure
    design = pd.DataFrame({"block": [16, 32.0, 128], "order": ["ijk", "ikj", "ijk"]})
    assert truth.config_index(design).tolist() == [1, 2, -1]


def test_geometric_ints_are_distinct_and_span_the_range():
    values = project.geometric_ints(32, 512, 64)
    assert len(values) == 64 == len(set(values.tolist()))
    assert values[0] == 32 and values[-1] == 512
    assert np.all(np.diff(np.log(values)) > 0)


def test_listed_inputs_problem_declares_the_truths_points_and_a_grid_of_every_value():
    """LU's truth, 3 x 3 points over (m, n): each input becomes the list of its three values
    and the grid takes every value; the campaign's space then holds exactly those points.
    Points that are not a product of per-input values cannot be listed."""
    problem = project.lu_problem(3)
    listed = project.listed_inputs_problem(problem)
    for name in ("m", "n"):
        values = sorted(problem.points[name].unique().tolist())
        assert listed.config["inputs"][name] == {"type": "int", "values": values}
    assert listed.config["optimization"]["grid"] == {"m": 3, "n": 3}
    assert problem.config["inputs"] != listed.config["inputs"]  # a copy, the case untouched
    assert listed.points.equals(problem.points) and listed.budget == problem.budget
    ragged = replace(problem, points=problem.points.iloc[:-1])
    with pytest.raises(ValueError, match="not the product"):
        project.listed_inputs_problem(ragged)


def test_gemm_problem_three_inputs_and_every_design_valid_at_every_point():
    """The GEMM case: 5 x 5 x 4 points over (m, n, k), the 36 configurations of its reduced
    design valid at each (no constraint), its fixed default one of them."""
    problem = project.gemm_problem(5)
    assert problem.points.shape == (100, 3)
    assert not problem.points.duplicated().any()
    assert problem.points.min().tolist() == [32, 32, 32]
    assert problem.points.max().tolist() == [256, 256, 256]
    setup = project._prepared(problem, for_truth=False)
    try:
        cells = project.valid_cells(problem, setup.space)
    finally:
        setup.executor.close()
    assert len(cells) == 100 * 36
    design = [p.name for p in setup.space.design]
    default = pd.DataFrame([problem.default])[design]
    assert len(cells[design].drop_duplicates().merge(default)) == 1
    assert problem.budget == 300
    assert len(project.gemm_problem(2).points) == 8


def test_gemm_cuda_problem_is_the_shipped_cuda_kernel_over_three_inputs():
    """The GPU case: 5 x 5 x 4 points over (m, n, k) in [64, 1024], the builtin's whole design
    (60 configurations under its constraints, the expert one of them); its configuration is
    one the project accepts (parsed here; measured only where CuPy and a GPU are)."""
    import itertools

    import mlkaps_gpu
    from mlkaps_gpu.kernels import load_builtin

    problem = project.gemm_cuda_problem(5)
    assert problem.points.shape == (100, 3)
    assert not problem.points.duplicated().any()
    assert problem.points.min().tolist() == [64, 64, 64]
    assert problem.points.max().tolist() == [1024, 1024, 1024]
    assert problem.budget == 200 and problem.truth_repeats == 10
    config = mlkaps_gpu.parse_config(project.config_text(problem.config), label="gemm_cuda.toml")
    assert config.kernel.executor == "cupy"
    builtin = load_builtin("gemm_cuda")
    assert [p.name for p in builtin.design] == list(problem.config["design"])[:3]
    design = problem.config["design"]
    valid = [
        combo
        for combo in itertools.product(
            design["block_x"]["values"], design["block_y"]["values"], design["tile_k"]["values"]
        )
        if 32 <= combo[0] * combo[1] <= 1024
    ]
    assert len(valid) == 60
    assert tuple(problem.default.values()) in valid
    assert len(project.gemm_cuda_problem(2).points) == 8
    assert project.gemm_cuda_problem(5, budget=120).budget == 120


def test_truth_replay_tunes_the_problem_on_its_truth_table(tmp_path):
    """The project header on the peers' data: the demo's problem (its constraints, budget 60)
    replayed from a synthetic truth whose best block is the one nearest n / 4."""
    problem = project.demo_problem(6)
    problem.config["sampling"]["budget"] = 60
    config = project.truth_replay_config(problem, tmp_path / "t.csv", seed=1)
    assert "inputs" not in config
    assert config["design"] == {"constraints": problem.config["design"]["constraints"]}
    assert config["kernel"]["input_columns"] == ["n"]
    assert config["kernel"]["design_columns"] == ["block", "order"]
    setup = project._prepared(problem, for_truth=False)
    cells = project.valid_cells(problem, setup.space)
    setup.executor.close()
    ratio = np.log2(cells["block"] / (cells["n"] / 4.0))
    cells["time"] = (1.0 + ratio**2) * (1.0 + 0.1 * (cells["order"] != "ijk"))
    cells.loc[cells.index[:1], "time"] = math.inf  # a failed cell replays as a failure
    truth = project.truth_of(problem, cells)
    result = project.run_truth_replay(problem, cells, truth, 1, tmp_path)
    assert (result.answers >= 0).all()
    fractions = truth_module.point_fractions(truth, result.answers)
    assert truth_module.summarize_fractions(fractions)["geomean"] > 0.9
    assert len(result.samples) <= 60


def test_peers_draw_from_one_pass_and_every_row_is_scored_on_the_others():
    """With passes 0 to 2, the budgeted peers' table is pass 0 and the score the minimum over
    passes 1 and 2 (no row scored on the values it chose by); with one pass both are that
    pass; a pass where a point did not run at all is refused."""
    problem = project.demo_problem(3)
    problem.points = pd.DataFrame({"n": [32, 40, 48]})
    setup = project._prepared(problem, for_truth=False)
    cells = project.valid_cells(problem, setup.space)
    setup.executor.close()
    rng = np.random.default_rng(0)
    for index in range(3):
        cells[f"time_pass{index}"] = 1.0 + rng.random(len(cells))
    cells["time"] = cells[["time_pass0", "time_pass1", "time_pass2"]].min(axis=1)
    table, truth, independent = project.table_and_scoring(problem, cells)
    assert independent
    np.testing.assert_array_equal(table.times, project.truth_of(problem, cells, "time_pass0").times)
    expected = np.minimum(
        project.truth_of(problem, cells, "time_pass1").times,
        project.truth_of(problem, cells, "time_pass2").times,
    )
    np.testing.assert_array_equal(truth.times, expected)
    assert not np.array_equal(table.best_config(), truth.best_config())  # another noise draw
    # another pass as the table (pass_replays.py): the score never holds it
    table, truth, _ = project.table_and_scoring(problem, cells, "time_pass1")
    np.testing.assert_array_equal(table.times, project.truth_of(problem, cells, "time_pass1").times)
    expected = np.minimum(
        project.truth_of(problem, cells, "time_pass0").times,
        project.truth_of(problem, cells, "time_pass2").times,
    )
    np.testing.assert_array_equal(truth.times, expected)
    one = cells.drop(columns=["time_pass1", "time_pass2"])
    table, truth, independent = project.table_and_scoring(problem, one)
    assert not independent and table is truth
    broken = cells.copy()
    broken.loc[broken["n"] == 48, "time_pass0"] = np.nan
    with pytest.raises(ValueError, match="cannot be scored"):
        project.table_and_scoring(problem, broken)


def test_live_peers_draw_from_a_pass_measured_like_the_campaign():
    """The budgeted peers on cells the demo kernel measures live (the campaign's settings):
    one answer per point of the truth, each a configuration listed there; a truth of other
    points is refused."""
    problem = project.demo_problem(3)
    problem.points = pd.DataFrame({"n": [32, 40, 48]})
    problem.config["sampling"]["budget"] = 12
    setup = project._prepared(problem, for_truth=False)
    cells = project.valid_cells(problem, setup.space)
    setup.executor.close()
    cells["time"] = 1.0 + cells["block"] / cells["n"]
    truth = project.truth_of(problem, cells)
    answers, live, table = bench.live_peer_answers(problem, truth, seed=0)
    assert len(live) == len(cells) and np.isfinite(live["time_pass0"]).all()
    assert project.cells_differ(table, truth) == ""
    assert set(answers) == set(peers.peer_answers(truth, 12, np.random.default_rng(0)))
    for chosen in answers.values():
        assert len(chosen) == truth.n_points
        assert np.isfinite(truth.times[np.arange(truth.n_points), chosen]).all()
    other = project.truth_of(problem, cells[cells["n"] != 48])
    with pytest.raises(RuntimeError, match="not the truth's"):
        bench.live_peer_answers(problem, other, seed=0)


# ------------------------------------------------------------------------------ AutoHeuristic
def write_ah_file(path, *, extern: bool = True):
    """A small AutoHeuristic file: 24 shapes (m, k, dtype), 3 Triton choices (+ extern),
    each cell twice; BLOCK-M=16 is best below m = 64, BLOCK-M=64 above; BLOCK-M=128 is not
    listed below m = 64 and fails at m = 512."""
    meta = {"name": "mixed_mm", "numerical_features": ["m", "k"], "categorical_features": ["dt"]}
    lines = ["m,k,dt,choice,feedback"]
    rng = np.random.default_rng(0)
    for m in (8, 16, 32, 64, 128, 256, 512, 1024):
        for k in (64, 256, 1024):
            dt = "torch.float16" if k != 256 else "torch.bfloat16"
            base = m * k / 1e5
            times = {16: base * (1 if m < 64 else 3), 64: base * (2 if m < 64 else 1)}
            if m >= 64:
                times[128] = math.inf if m == 512 else base * 1.5
            for block, value in times.items():
                choice = f"type=triton_BLOCK-M={block}_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4"
                for _ in range(2):
                    noisy = value * (1 + 0.01 * rng.random()) if math.isfinite(value) else value
                    lines.append(f"{m},{k},{dt},{choice},{noisy}")
            if extern:
                lines.append(f"{m},{k},{dt},extern_fallback_mixed_mm,{base * 5}")
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps(meta) + "\n" + "\n".join(lines) + "\n")
    return path


def test_parse_choice():
    parsed = truth_module.parse_choice(
        "type=triton_BLOCK-M=128_BLOCK-K=-1_BLOCK-N=32_numstages=3_numwarps=4"
    )
    assert parsed == {
        "kind": "triton",
        "BLOCK_M": 128,
        "BLOCK_K": -1,
        "BLOCK_N": 32,
        "numstages": 3,
        "numwarps": 4,
    }
    assert truth_module.parse_choice("extern_fallback_mixed_mm") == {
        "kind": "extern_fallback_mixed_mm"
    }


def test_autoheuristic_truth_medians_listing_and_failures(tmp_path):
    truth = truth_module.autoheuristic_truth(write_ah_file(tmp_path / "t.txt.gz"))
    assert truth.n_points == 24
    assert len(truth.configs) == 4
    assert truth.categorical_inputs == ["dt"]
    block128 = truth.labels.index(
        "type=triton_BLOCK-M=128_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4"
    )
    small = truth.inputs["m"].to_numpy() < 64
    assert np.isnan(truth.times[small, block128]).all()  # not listed
    assert np.isinf(truth.times[truth.inputs["m"].to_numpy() == 512, block128]).all()
    extern = truth.labels.index("extern_fallback_mixed_mm")
    assert truth.configs.loc[extern, "BLOCK_M"] == -1
    default = bench.inductor_default({"name": "mixed_mm"}, truth)
    assert default is not None and (default[1] == extern).all()


def test_inductor_flex_default_by_dtype_and_head_dim():
    configs = pd.DataFrame(
        {
            "kind": ["triton"] * 3,
            "BLOCK_M": [128, 128, 64],
            "BLOCK_N": [32, 64, 64],
            "numstages": [3, 3, 3],
            "numwarps": [4, 4, 4],
        }
    )
    inputs = pd.DataFrame(
        {
            "h": [1, 2, 1],
            "m": [128, 128, 256],
            "q_stride_0": [128 * 64, 2 * 128 * 64, 256 * 16],  # head dims 64, 64, 16
            "dtype": ["torch.float32", "torch.float16", "torch.float32"],
        }
    )
    truth = Truth(
        "f", inputs, configs, ["a", "b", "c"], np.ones((3, 3)), ["h", "m", "q_stride_0"], ["dtype"]
    )
    label, answers = bench.inductor_default(
        {"name": "flex_attention", "device_capa": [8, 0]}, truth
    )
    assert answers.tolist() == [0, 1, 2]  # table entries, then the float32 fallback 64 x 64
    assert bench.inductor_default({"name": "flex_attention", "device_capa": [9, 0]}, truth) is None


def test_header_choices_by_choice_string():
    truth = make_truth(np.ones((2, 2)))
    chosen = pd.DataFrame({"choice": ["c=1", "nope"]})
    assert bench.header_choices(truth, chosen).tolist() == [1, -1]


# ------------------------------------------------------------------------------ peers
def test_best_single_full_is_the_best_geomean():
    truth = switching_truth()
    chosen = peers.best_single_full(truth)
    scores = [
        truth_module.summarize_fractions(
            truth_module.point_fractions(truth, np.full(truth.n_points, c))
        )["geomean"]
        for c in range(3)
    ]
    assert chosen == int(np.argmax(scores))


def test_best_single_from_cells_prefers_the_config_closest_to_the_best():
    truth = make_truth(np.array([[1.0, 1.1, 3.0], [2.0, 2.1, 9.0], [4.0, 3.0, 20.0]] * 5))
    cells = np.array([[p, c] for p in range(truth.n_points) for c in range(3)])
    assert peers.best_single_from_cells(truth, cells) == 1  # never more than 10 % off


def test_space_filling_points_are_distinct_and_spread_in_log_space():
    truth = switching_truth()
    logs = np.log(truth.inputs["x"].to_numpy(dtype=float))
    for seed in range(5):
        chosen = peers.space_filling_points(truth, 5, np.random.default_rng(seed))
        assert len(set(chosen.tolist())) == 5
        # farthest-point sampling: no two chosen closer than half an even spacing
        gaps = np.diff(np.sort(logs[chosen]))
        assert gaps.min() >= (logs.max() - logs.min()) / 4 / 2 * 0.9


def test_tuned_points_fit_in_the_budget():
    truth = switching_truth()
    for budget in (3, 10, 31, 1000):
        tuned = peers.tuned_points(truth, budget, np.random.default_rng(0))
        spent = truth.listed[tuned].sum()
        assert spent <= max(budget, 3)
        assert len(tuned) == min(truth.n_points, max(1, budget // 3))


def test_autotune_nearest_with_every_point_tuned_is_optimal_and_deterministic():
    truth = switching_truth()
    everything = peers.autotune_nearest(truth, truth.n_cells, np.random.default_rng(0))
    assert (everything == truth.best_config()).all()
    few = [peers.autotune_nearest(truth, 12, np.random.default_rng(5)) for _ in range(2)]
    assert (few[0] == few[1]).all()
    # four tuned points beat any single configuration (at best 0.5 here)
    assert (
        truth_module.summarize_fractions(truth_module.point_fractions(truth, few[0]))["geomean"]
        > 0.6
    )


def test_first_listed_skips_unlisted_configs():
    truth = make_truth(np.array([[np.nan, 2.0, 3.0], [1.0, 1.0, 1.0]]))
    preference = np.array([[0, 2, 1], [2, 0, 1]])
    assert peers.first_listed(truth, preference).tolist() == [2, 2]


def test_greedy_portfolio_covers_each_half_with_its_config():
    slowdown = np.array([[1.0, 3.0, 1.5], [1.0, 3.0, 1.5], [3.0, 1.0, 1.5], [3.0, 1.0, 1.5]])
    assert peers.greedy_portfolio(slowdown) == [2, 0, 1]
    assert peers.greedy_portfolio(slowdown, size=1) == [2]


def test_portfolio_tree_learns_the_switch():
    truth = switching_truth(60)
    answers = peers.portfolio_tree(truth, 60, np.random.default_rng(1))
    fractions = truth_module.point_fractions(truth, answers)
    assert truth_module.summarize_fractions(fractions)["geomean"] > 0.9


def test_lightgbm_argmin_on_every_cell_finds_the_switch():
    truth = switching_truth(60)
    points, configs = np.nonzero(truth.listed)
    table, times = peers.cells_table(truth, np.column_stack([points, configs]))
    answers = peers.lightgbm_argmin(truth, table, times, seed=0)
    assert (
        truth_module.summarize_fractions(truth_module.point_fractions(truth, answers))["geomean"]
        > 0.95
    )


def test_lightgbm_argmin_avoids_failed_cells():
    xs = np.geomspace(10, 1000, 30).round()
    times = np.column_stack([np.full(30, np.inf), np.full(30, 2.0), np.full(30, 3.0)])
    truth = make_truth(times, xs)
    points, configs = np.nonzero(truth.listed)
    table, values = peers.cells_table(truth, np.column_stack([points, configs]))
    answers = peers.lightgbm_argmin(truth, table, values, seed=0)
    assert (answers == 1).all()


def test_peer_answers_same_seed_same_answers():
    truth = switching_truth()
    first = peers.peer_answers(truth, 30, np.random.default_rng(7))
    second = peers.peer_answers(truth, 30, np.random.default_rng(7))
    assert first.keys() == second.keys() and len(first) == 4
    for name in first:
        assert (first[name] == second[name]).all(), name


# ------------------------------------------------------------------------------ the script
def test_quick_run_on_a_synthetic_autoheuristic_file(tmp_path, capsys):
    import mlkaps_gpu.executors

    data = write_ah_file(tmp_path / "tiny_gpu.txt.gz")
    out = tmp_path / "results"
    argv = ["--data", str(data), "--quick", "--shares", "20", "--out", str(out)]
    argv += ["--workdir", str(tmp_path / "campaigns")]
    assert bench.main(argv) == 0
    frame = pd.read_csv(out / "bench_inputs_quick_tiny_gpu.csv", comment="#")
    tools = set(frame["tool"])
    assert {
        "best single configuration (full knowledge)",
        "fixed default (Inductor's extern fallback)",
        "autotune k inputs + nearest neighbour",
        "Helion-style portfolio + tree",
        "random cells + LightGBM argmin",
    } <= tools
    assert (frame["points"] == 24).all()
    # 9 shapes list 3 choices, 15 list 4: 87 cells, of which 20 %
    assert frame["B"].unique().tolist() == [17]
    full = frame[frame["tool"] == "best single configuration (full knowledge)"].iloc[0]
    assert 0 < full["geomean"] < 1
    text = (out / "bench_inputs_quick_tiny_gpu.md").read_text()
    assert text.startswith("# bench_inputs: tiny_gpu")
    assert "commit:" in text
    assert "Noise floor of the table's own repeats" in text  # its cells were measured twice
    assert (out / "bench_inputs_quick_tiny_gpu.png").stat().st_size > 0
    if hasattr(mlkaps_gpu.executors, "load_autoheuristic"):
        # a file without a config of its own is replayed by a campaign made for it
        header = frame[frame["tool"] == bench.HEADER]
        assert len(header) == 1 and 0 < header["geomean"].iloc[0] <= 1
        first = frame[frame["tool"] == bench.HEADER_FIRST]
        assert len(first) == 1 and first["geomean"].iloc[0] <= header["geomean"].iloc[0]
        assert header["tune_seconds"].iloc[0] > 0
        assert "a configuration made for the file" in text
    else:
        assert bench.HEADER not in tools
        assert "not available yet (table replay not landed)" in capsys.readouterr().out


def test_walk_ranking_takes_the_first_ranked_answer_the_point_lists():
    truth = make_truth(np.array([[np.nan, 2.0, 3.0], [1.0, 1.0, 1.0], [np.nan, np.nan, 1.0]]))
    ranked = [np.array([0, 0, 0]), np.array([-1, 1, 1]), np.array([2, 2, -1])]
    counts = np.array([3, 3, 2])
    # point 0: 0 unlisted, rank 1 has no such choice, 2 listed; point 1: its first answer;
    # point 2: nothing listed within its count: the first answer (scored as the slowest)
    assert bench.walk_ranking(truth, ranked, counts).tolist() == [2, 0, 0]


def test_parse_seeds():
    assert bench.parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert bench.parse_seeds("0-1,7") == [0, 1, 7]


def test_header_against_campaign_model_counts_runs_below_and_slow_points():
    def row(tool, seed, geomean, below):
        return {"tool": tool, "seed": seed, "geomean": geomean, "below_0.67": below}

    model = bench.CAMPAIGN_LGBM
    rows = [
        row(bench.HEADER, 0, 0.95, 0),
        row(model, 0, 0.96, 0),
        row(bench.HEADER, 1, 0.90, 2),
        row(model, 1, 0.95, 0),
        row(bench.HEADER + " (sampling lhs)", 0, 0.60, 5),
        row(model + " (sampling lhs)", 0, 0.90, 1.2),
        row("fixed default", "-", 0.3, 9),
    ]
    notes = bench.header_against_campaign_model(rows)
    assert len(notes) == 2
    assert "runs more than 0.02 below: 1 of 2" in notes[0]
    assert "where the model's argmin has none: 1 of 2" in notes[0]
    assert notes[1].startswith(bench.HEADER + " (sampling lhs)")
    assert "below: 1 of 1" in notes[1] and "has none: 0 of 1" in notes[1]


def test_replay_config_absent_until_the_loader_lands_and_made_for_other_files(
    tmp_path, monkeypatch
):
    import mlkaps_gpu.executors

    data = write_ah_file(tmp_path / "7 odd-name.txt.gz")
    if hasattr(mlkaps_gpu.executors, "load_autoheuristic"):
        config, where = bench.replay_config("7 odd-name", data)
        assert config["kernel"]["format"] == "autoheuristic"
        assert config["kernel"]["files"] == str(data.resolve())
        assert config["trees"]["prefix"] == "k_7_odd_name"
        assert where.parent == data.resolve().parent
        monkeypatch.delattr(mlkaps_gpu.executors, "load_autoheuristic")
    assert bench.replay_config("7 odd-name", data) is None


def test_noise_floor_scores_each_pass_optimum_on_the_other():
    problem = project.Problem(
        name="p",
        config={"design": {"block": {}, "order": {}, "constraints": []}},
        points=pd.DataFrame({"n": [32, 64]}),
        default={"block": 8, "order": "ijk"},
    )
    cells = pd.DataFrame(
        {
            "n": [32, 32, 64, 64],
            "block": [8, 16, 8, 16],
            "order": ["ijk"] * 4,
            "time_pass0": [1.0, 2.0, 4.0, 5.0],
            "time_pass1": [2.0, 1.0, 4.0, 5.0],  # at n = 32 the passes disagree
        }
    )
    cells["time"] = cells[["time_pass0", "time_pass1"]].min(axis=1)
    floors = project.noise_floor(problem, cells)
    assert [(f["chosen on"], f["scored on"]) for f in floors] == [
        ("time_pass0", "time_pass1"),
        ("time_pass1", "time_pass0"),
    ]
    for floor in floors:
        assert floor["geomean"] == pytest.approx(math.sqrt(0.5))
        assert floor["worst"] == 0.5
    truth = project.truth_of(problem, cells)
    assert truth.optimum.tolist() == [1.0, 4.0]


def test_set_reaches_every_campaign_of_a_measured_case(tmp_path, monkeypatch):
    """``--set trees.max_configs=auto`` is in the problem's configuration that the live
    campaigns and the truth replay copy."""
    seen = {}

    def measured(problem, cells, seeds, samplers, workdir, live_peers=False, listed_inputs=False):
        seen["config"] = problem.config
        return [], {}, None, []

    monkeypatch.setattr(bench, "load_or_measure_truth", lambda *args, **kwargs: pd.DataFrame())
    monkeypatch.setattr(bench, "bench_measured", measured)
    args = argparse.Namespace(
        quick=False,
        budget=None,
        out=tmp_path,
        remeasure_truth=False,
        truth_from_other_machine=False,
        samplers="default",
        skip_project=False,
        live_peers=False,
        listed_inputs=False,
        set=["trees.max_configs=auto", "trees.max_depth=4"],
    )
    bench.measured_job("lu", args, [0], 2, tmp_path, [])
    assert seen["config"]["trees"]["max_configs"] == "auto"
    assert seen["config"]["trees"]["max_depth"] == 4


def test_set_reaches_the_replay_campaigns_and_a_bad_one_exits_2(tmp_path, monkeypatch):
    """``--set`` on a table: every replay campaign of the project runs with it, and the notes
    say so; a malformed assignment stops the run before any work (exit status 2)."""
    seen = []

    def project_run(case, replay, truth, budget, seed, workdir, max_configs=None):
        seen.append(replay[0])
        return np.zeros(truth.n_points, dtype=int), np.zeros(truth.n_points, dtype=int)

    monkeypatch.setattr(bench, "replay_config", lambda case, data: ({"trees": {}}, data))
    monkeypatch.setattr(bench, "replay_header_answers", project_run)
    data = write_ah_file(tmp_path / "tiny_gpu.txt.gz")
    _, _, _, notes = bench.bench_replay(
        "tiny_gpu", data, [0, 1], [20.0], tmp_path, settings=["sampling.confirm=0.05"]
    )
    assert len(seen) == 2
    assert all(config["sampling"]["confirm"] == 0.05 for config in seen)
    assert any("with `sampling.confirm=0.05`" in note for note in notes)
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--data", str(data), "--set", "confirm"])
    assert stopped.value.code == 2


def test_a_cached_truth_of_another_machine_is_refused_for_live_campaigns(tmp_path) -> None:
    """The campaigns measure the kernel on this machine: scored against a truth measured on
    another CPU, they would be judged on another machine's times (which configuration is
    fastest moves with the caches)."""
    problem = argparse.Namespace(name="demo")
    cells = pd.DataFrame({"n": [32], "block": [8], "order": ["ijk"], "time": [1e-4]})
    path = tmp_path / "bench_inputs_truth_demo.csv"
    path.write_text("# machine: 99 cores, Another CPU, GPU: none\n" + cells.to_csv(index=False))
    with pytest.raises(bench.TruthMachineError, match="Another CPU.*--remeasure-truth"):
        bench.load_or_measure_truth(problem, path, 5, False, None)
    allowed = bench.load_or_measure_truth(problem, path, 5, False, None, other_machine=True)
    pd.testing.assert_frame_equal(allowed, cells)
    here = tmp_path / "here.csv"
    here.write_text(f"# machine: {bench.machine()}\n" + cells.to_csv(index=False))
    pd.testing.assert_frame_equal(bench.load_or_measure_truth(problem, here, 5, False, None), cells)
