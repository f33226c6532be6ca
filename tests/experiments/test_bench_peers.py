"""Pure helpers of experiments/bench_peers.py (fractions, geomean, the exact random-search
expectation, the Kernel Tuner cache conversion, the config stripping), on small synthetic data;
the replay data tests skip when MLKAPS_GPU_DATA is unset."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import sqlite3
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.experiments._scripts import load_benchkit, load_script

bench = load_script("bench_peers")
cases = load_benchkit("cases")
configs = load_benchkit("configs")
metrics = load_benchkit("metrics")
peers = load_benchkit("peers")
project = load_benchkit("project")
report = load_benchkit("report")
tools = load_benchkit("tools")


@pytest.fixture
def replay_data() -> Path:
    root = os.environ.get("MLKAPS_GPU_DATA")
    if not root:
        pytest.skip("MLKAPS_GPU_DATA is not set")
    path = Path(root)
    if not (path / "convolution_6gpu").is_dir() or not (path / "syr2k_cpu").is_dir():
        pytest.skip(f"MLKAPS_GPU_DATA={root} does not hold the replay data")
    return path


# ----------------------------------------------------------------------- fractions, geomean
def test_fraction_of_optimum_and_failures():
    assert metrics.fraction_of_optimum(2.0, 4.0) == 0.5
    assert metrics.fraction_of_optimum(2.0, 2.0) == 1.0
    for failed in (math.nan, math.inf, 0.0, -1.0, None, "RuntimeFailedConfig"):
        assert metrics.fraction_of_optimum(2.0, failed) == 0.0


def test_geomean():
    assert metrics.geomean([1.0, 0.25]) == pytest.approx(0.5)
    assert metrics.geomean([0.9, 0.0, 1.0]) == 0.0  # a failed choice zeroes the run
    assert math.isnan(metrics.geomean([]))


def test_summary_geomean_over_inputs_then_mean_sd_over_seeds():
    rows = pd.DataFrame(
        {
            "tool": ["t"] * 4,
            "b": [25] * 4,
            "seed": [0, 0, 1, 1],
            "input": ["a", "b", "a", "b"],
            "fraction": [1.0, 0.25, 0.64, 1.0],
        }
    )
    summary = metrics.summarize_runs(rows)
    assert len(summary) == 1
    row = summary.iloc[0]
    assert row["mean"] == pytest.approx((0.5 + 0.8) / 2)
    assert row["sd"] == pytest.approx(np.std([0.5, 0.8], ddof=1))
    assert row["n"] == 2


def test_done_when_2_counts():
    def rows(tool, times):
        return [
            {"tool": tool, "b": 25, "seed": s, "input": i, "time": t}
            for (s, i), t in zip([(0, "a"), (0, "b"), (1, "a")], times, strict=True)
        ]

    table = pd.DataFrame(
        rows(tools.HEADER, [1.0, 1.05, math.nan]) + rows(tools.BEST_MEASURED, [1.0, 1.0, 2.0])
    )
    counts = metrics.done_when_2_counts(table).iloc[0]
    assert counts["runs"] == 3
    assert counts["below_0.99"] == 2  # 1/1.05 = 0.952 and a failed header (ratio 0)
    assert counts["below_0.9"] == 1
    assert counts["min_ratio"] == 0.0


def test_lead_over_best_peer_says_when_the_seeds_cannot_tell():
    def runs(tool, b, values):
        return [
            {"tool": tool, "b": b, "seed": seed, "input": "a", "fraction": value}
            for seed, value in enumerate(values)
        ]

    rng = np.random.default_rng(0)
    clear = rng.normal(0.9, 0.01, 20)
    noisy = np.array([0.95, 0.4, 0.97, 0.96, 0.94])
    table = pd.DataFrame(
        runs(tools.HEADER, 25, clear)
        + runs(tools.BEST_MEASURED, 25, clear + 0.05)  # never a peer
        + runs("peer A", 25, clear - 0.1)
        + runs("peer B", 25, clear - 0.05)
        + runs(tools.HEADER, 50, noisy)
        + runs("peer A", 50, [0.92, 0.9, 0.93, 0.88, 0.9])
        + runs(tools.HEADER, 100, [0.8, 0.82, 0.81])
        + [{"tool": tools.RANDOM, "b": 100, "seed": -1, "input": "a", "fraction": 0.85}]
        + runs(tools.HEADER, 200, [0.9])  # one seed: no interval
        + runs("peer A", 200, [0.8, 0.7])
    )
    lead = metrics.lead_over_best_peer(table).set_index("b")
    assert list(lead.index) == [25, 50, 100]
    assert lead.loc[25, "peer"] == "peer B"
    assert lead.loc[25, "difference"] == pytest.approx(0.05)
    assert lead.loc[25, "low"] > 0 and lead.loc[25, "verdict"] == "above"
    assert lead.loc[50, "difference"] == pytest.approx(noisy.mean() - 0.906)
    assert lead.loc[50, "low"] < 0 < lead.loc[50, "high"]
    assert lead.loc[50, "verdict"] == "within noise"
    # the exact random-search expectation is a constant, not a sample
    assert lead.loc[100, "peer"] == tools.RANDOM
    assert lead.loc[100, "high"] < 0 and lead.loc[100, "verdict"] == "below"


def test_lead_per_input_names_the_best_peer_of_each_input_value():
    def runs(tool, value, fractions, b=25):
        return [
            {"tool": tool, "b": b, "seed": seed, "input": value, "fraction": fraction}
            for seed, fraction in enumerate(fractions)
        ]

    table = pd.DataFrame(
        runs(tools.HEADER, "a", [0.9, 0.7])
        + runs(tools.BEST_MEASURED, "a", [1.0, 1.0])  # never a peer
        + runs("peer A", "a", [0.6, 0.6])
        + runs("peer B", "a", [0.5, 0.5])
        + runs(tools.HEADER, "b", [0.6, 0.6])
        + runs("peer A", "b", [0.5, 0.5])
        + runs("peer B", "b", [0.9, 0.8])
        + [{"tool": tools.RANDOM, "b": 25, "seed": -1, "input": "b", "fraction": 0.7}]
        + runs("peer A", "c", [0.5])  # no header at this value: no row
    )
    lead = metrics.lead_per_input(table).set_index("input")
    assert list(lead.index) == ["a", "b"]
    assert lead.loc["a", "header"] == pytest.approx(0.8)
    assert lead.loc["a", "peer"] == "peer A"
    assert lead.loc["a", "difference"] == pytest.approx(0.2)
    assert lead.loc["b", "peer"] == "peer B"
    assert lead.loc["b", "best_peer"] == pytest.approx(0.85)
    assert lead.loc["b", "difference"] == pytest.approx(-0.25)
    lines = report.lead_per_input_markdown(table)
    assert "| b | 25 | 0.600 | peer B | 0.850 | -0.250 |" in lines
    assert report.lead_per_input_markdown(table[table["tool"] != tools.HEADER]) == []


def test_lead_per_input_keeps_the_input_values_in_the_rows_order():
    rows = [
        {"tool": tool, "b": 25, "seed": 0, "input": value, "fraction": 0.5}
        for value in (60, 130, 2000)
        for tool in (tools.HEADER, "peer A")
    ]
    lead = metrics.lead_per_input(pd.DataFrame(rows))
    assert list(lead["input"]) == ["60", "130", "2000"]


# ------------------------------------------------------------------------------ random search
def _brute_force(times, k):
    values = np.asarray(times, dtype=float)
    optimum = np.nanmin(values)
    fractions = [0.0 if not np.isfinite(v) else optimum / v for v in values]
    subsets = list(itertools.combinations(range(len(values)), k))
    return float(np.mean([max(fractions[i] for i in subset) for subset in subsets]))


@pytest.mark.parametrize(
    "times",
    [
        [3.0, 1.0, 2.0, 4.0, 8.0, 5.0],
        [2.0, math.nan, 2.0, 1.5, 6.0, math.nan, 3.0],  # failures and ties
        [7.0],
    ],
)
def test_random_search_expectation_matches_enumeration(times):
    draws = list(range(1, len(times) + 1))
    exact = metrics.expected_fraction_random_search(times, draws)
    for k, value in zip(draws, exact, strict=True):
        assert value == pytest.approx(_brute_force(times, k), abs=1e-12)
    assert exact[-1] == pytest.approx(1.0)  # every configuration drawn: the optimum is found


def test_random_search_is_expected_fraction_not_fraction_of_expected_time():
    times = [1.0, 10.0]
    (value,) = metrics.expected_fraction_random_search(times, [1])
    assert value == pytest.approx((1.0 + 0.1) / 2)  # not 1 / 5.5


# ---------------------------------------------------------------------- Kernel Tuner caches
def _tiny_table():
    rows = []
    for pragma, tile in itertools.product(["", "#pragma a(i,j)"], [4, 8, 16]):
        time = 1.0 + tile / 4 + (0.5 if pragma else 0.0)
        rows.append({"p0": pragma, "p3": tile, "time": time, "status": "ok"})
    table = pd.DataFrame(rows)
    table.loc[(table["p0"] == "") & (table["p3"] == 16), ["time", "status"]] = [
        math.nan,
        "runtime_error",
    ]
    return table


def test_kernel_tuner_cache_conversion():
    table = _tiny_table()
    document, codes = peers.kernel_tuner_cache_from_table(table, ["p0", "p3"], "time", name="t")
    assert document["tune_params_keys"] == ["p0", "p3"]
    assert document["tune_params"] == {"p0": [0, 1], "p3": [4, 8, 16]}
    assert codes == {"p0": {"": 0, "#pragma a(i,j)": 1}}
    cache = document["cache"]
    assert len(cache) == 6
    assert cache["0,4"] == {"p0": 0, "p3": 4, "time": 2.0}
    assert cache["1,8"]["time"] == pytest.approx(3.5)
    assert cache["0,16"]["time"] == "RuntimeFailedConfig"
    # JSON round trip, every key is the comma join of its values
    again = json.loads(json.dumps(document))
    for key, entry in again["cache"].items():
        assert key == ",".join(str(entry[k]) for k in again["tune_params_keys"])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_kernel_tuner_reads_converted_cache(tmp_path):
    kernel_tuner = pytest.importorskip("kernel_tuner")
    document, _ = peers.kernel_tuner_cache_from_table(
        _tiny_table(), ["p0", "p3"], "time", name="tiny"
    )
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(document))
    results, _ = kernel_tuner.tune_kernel(
        "tiny",
        "",
        (1,),
        [],
        document["tune_params"],
        simulation_mode=True,
        cache=str(path),
        strategy="brute_force",
        quiet=True,
    )
    best, seen = peers.best_time_of_results(results, document["tune_params_keys"])
    assert seen == 6
    assert best == 2.0
    assert sum("__error__" in r for r in results) == 1


def test_best_time_of_results_skips_errors_and_old_marker():
    results = [
        {"a": 1, "time": 3.0},
        {"a": 2, "time": 1e20},
        {"a": 3, "time": 0.5, "__error__": "x"},
        None,
        {"a": 1, "time": 3.0},
        {"a": 4, "time": 2.5},
    ]
    assert peers.best_time_of_results(results, ["a"]) == (2.5, 4)


# --------------------------------------------------------------------------------- configs
def test_strip_config_keeps_the_problem_only():
    config = {
        "campaign": {"name": "c", "seed": 3},
        "kernel": {"executor": "replay", "files": {"gpu": {"A": "a.json.gz"}}},
        "design": {"constraints": ["x <= 4"]},
        "objectives": {"time": "minimize"},
        "sampling": {"method": "lhs", "budget": 300, "batch_size": 50},
        "surrogate": {"log_target": True},
        "trees": {"mode": "joint", "prefix": "conv", "verify_inputs": 2000},
    }
    stripped, removed = configs.strip_config(config)
    assert stripped == {
        "campaign": {"name": "c", "seed": 3},
        "kernel": {"executor": "replay", "files": {"gpu": {"A": "a.json.gz"}}},
        "design": {"constraints": ["x <= 4"]},
        "objectives": {"time": "minimize"},
        "sampling": {"budget": 300},
        "trees": {"prefix": "conv"},
    }
    assert set(removed) == {
        "sampling.method",
        "sampling.batch_size",
        "surrogate",
        "trees.mode",
        "trees.verify_inputs",
    }
    configs.apply_override(stripped, "sampling.method=ga_adaptive")
    configs.apply_override(stripped, "surrogate.log_target=true")
    configs.apply_override(stripped, "optimization.grid=8")
    assert stripped["sampling"]["method"] == "ga_adaptive"
    assert stripped["surrogate"]["log_target"] is True
    assert stripped["optimization"]["grid"] == 8
    with pytest.raises(ValueError):
        configs.apply_override(stripped, "nokey")


def test_toml_round_trip():
    data = {
        "kernel": {
            "files": {"N": {"130": "${MLKAPS_GPU_DATA}/a.csv", "2000": "b c.csv"}},
            "design_columns": ["p0", "p1"],
            "quoted key": 'say "hi"\\',
        },
        "design": {"constraints": ["a * b <= 1024", "x == 'y'"]},
        "sampling": {"budget": 10, "eps": 0.25, "flag": False},
    }
    assert tomllib.loads(configs.to_toml(data)) == data


def test_parse_tools():
    assert tools.parse_tools(["project", "kernel_tuner"]) == [
        "project",
        *(f"kt_{s}" for s in tools.KT_STRATEGIES),
    ]
    assert tools.parse_tools(["random,optuna", "pso"]) == [
        "kt_pso",
        "optuna_tpe",
        "random_search",
    ]
    with pytest.raises(SystemExit):
        tools.parse_tools(["nope"])


# ----------------------------------------------------------------------------- replay data
def test_syr2k_case_loads(replay_data):
    case = cases.load_case("syr2k", [], None)
    assert case.input_name == "N"
    assert case.inputs == ["130", "2000"]
    for land in case.landscapes:
        assert len(land.times) == 10648
        assert land.optimum == pytest.approx(np.nanmin(land.times))
    assert int(np.isnan(case.landscapes[1].times).sum()) == 5  # the runner's 1.0 failures
    assert "sampling.method" not in case.removed  # the syr2k config names no method


def test_restrict_files_keeps_the_named_values_in_order():
    data = {"kernel": {"files": {"gpu": {"A": "a.json", "B": "b.json", "C": "c.json"}}}}
    kept = cases.restrict_files(data, ["C", "A", "C"], "case.toml")
    assert kept["kernel"]["files"] == {"gpu": {"C": "c.json", "A": "a.json"}}
    assert list(data["kernel"]["files"]["gpu"]) == ["A", "B", "C"]  # the original is untouched
    with pytest.raises(
        cases.CaseError, match=r"case.toml: input gpu has no value 'D' \(allowed: A, B, C\)"
    ):
        cases.restrict_files(data, ["A", "D"], "case.toml")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--case", "syr2k", "--only", "99"], "no value '99' (allowed: 130, 2000)"),
        (["--only", "130"], "give --case convolution or --case syr2k"),
    ],
)
def test_only_refuses_values_the_case_lacks(argv, message, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("MLKAPS_GPU_DATA", "unused")
    assert bench.main([*argv, "--results", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written


def test_separate_campaigns_measure_one_input_value_each(replay_data, tmp_path):
    case = cases.load_case("syr2k", [], None, None, separately=True)
    assert case.name == "syr2k_separately" and case.separate
    rows, seconds = project.run_project(case, 10, 0, tmp_path)
    header = [r for r in rows if r["tool"] == tools.HEADER]
    assert [r["input"] for r in header] == ["130", "2000"]
    assert all(r["n_evaluated"] == 10 and r["case"] == "syr2k_separately" for r in header)
    assert seconds > 0
    stores = sorted((tmp_path / "syr2k_separately").glob("*/samples.sqlite"))
    assert len(stores) == 2  # one campaign per value, each with a budget of b
    for store in stores:
        with sqlite3.connect(store) as connection:
            values = connection.execute("select distinct N from samples").fetchall()
            count = connection.execute("select count(*) from samples").fetchone()[0]
        assert len(values) == 1 and count == 10


@pytest.mark.slow
def test_quick_run_of_the_peers(replay_data, tmp_path):
    code = bench.main(
        [
            "--case",
            "syr2k",
            "--budgets",
            "25",
            "--seeds",
            "1",
            "--first-seed",
            "3",
            "--tools",
            "random_search",
            "optuna_tpe",
            "kt_random_sample",
            "--results",
            str(tmp_path),
            "--workdir",
            str(tmp_path / "work"),
        ]
    )
    assert code == 0
    table = pd.read_csv(tmp_path / "bench_peers_syr2k.csv", comment="#")
    assert tools.RANDOM in set(table["tool"])
    assert (table["fraction"].between(0, 1)).all()
    report = (tmp_path / "bench_peers_syr2k.md").read_text()
    assert report.startswith("# bench_peers: syr2k")
    if importlib.util.find_spec("optuna") is not None:
        assert set(table.loc[table["tool"] == "Optuna TPE", "seed"]) == {3}
    else:  # the optional `bench` extra is absent: the peer is named, not scored
        assert "Optuna TPE" not in set(table["tool"])
        assert "| Optuna TPE | not installed |" in report


TINY_CONFIG = """
[campaign]
name = "tiny"
seed = 0

[kernel]
executor = "replay"
format = "csv"
objective = "time"
design_columns = ["tile", "unroll"]
files = { size = { small = "small.csv", large = "large.csv" } }

[objectives]
time = "minimize"

[sampling]
budget = 16
method = "random"

[trees]
prefix = "tiny"
"""


def _tiny_replay(folder: Path, format: str = "csv") -> Path:
    """A replay config of two input values over 6 x 2 configurations, each value with its own
    optimum (``tile`` 2 at ``small``, 32 at ``large``), as CSV tables or T4 results files."""
    tiles = [1, 2, 4, 8, 16, 32]
    config = TINY_CONFIG
    for value, best in (("small", 2), ("large", 32)):
        rows = [
            {"tile": t, "unroll": u, "time": 1.0 + abs(math.log2(t / best)) + 0.5 * (u == "no")}
            for t in tiles
            for u in ("yes", "no")
        ]
        if format == "csv":
            pd.DataFrame(rows).to_csv(folder / f"{value}.csv", index=False)
            continue
        results = [
            {
                "configuration": {"tile": row["tile"], "unroll": row["unroll"]},
                "times": {"runtimes": [row["time"]]},
                "invalidity": "correct",
                "correctness": 1,
                "measurements": [{"name": "time", "value": row["time"], "unit": "s"}],
            }
            for row in rows
        ]
        document = {"schema_version": "1.0.0", "results": results}
        (folder / f"{value}.json").write_text(json.dumps(document), encoding="utf-8")
        config = config.replace(f"{value}.csv", f"{value}.json")
    if format == "t4":
        config = config.replace('format = "csv"', 'format = "t4"')
        config = config.replace('design_columns = ["tile", "unroll"]\n', "")
    path = folder / "my kernel.toml"
    path.write_text(config, encoding="utf-8")
    return path


@pytest.mark.parametrize("format", ["csv", "t4"])
def test_a_replay_config_of_ones_own_is_a_case(tmp_path, monkeypatch, format):
    monkeypatch.delenv("MLKAPS_GPU_DATA", raising=False)  # not needed for one's own data
    config = _tiny_replay(tmp_path, format)
    results = tmp_path / "results"
    argv = ["--config", str(config), "--budgets", "6", "--seeds", "1", "--tools", "project"]
    argv += ["random_search", "--results", str(results), "--workdir", str(tmp_path / "work")]
    assert bench.main(argv) == 0
    table = pd.read_csv(results / "bench_peers_my_kernel.csv", comment="#")
    header = table[table["tool"] == tools.HEADER]
    assert sorted(header["input"]) == ["large", "small"]
    assert header["n_evaluated"].sum() == 12  # one campaign of B = 2 b
    assert (table["fraction"].between(0, 1)).all() and (header["status"] == "ok").all()
    exact = table[table["tool"] == tools.RANDOM].set_index("input")["fraction"]
    times = 1.0 + np.abs(np.log2(np.array([1, 2, 4, 8, 16, 32]) / 2))
    times = np.concatenate([times, times + 0.5])  # small: 12 configurations, optimum 1.0
    assert exact["small"] == pytest.approx(_brute_force(times, 6))
    text = (results / "bench_peers_my_kernel.md").read_text()
    assert text.startswith("# bench_peers: my_kernel")
    assert "`my kernel.toml` stripped to the problem" in text
    assert "sampling.method" in text  # the stripped method setting is listed


def test_kernel_tuner_stays_in_data_that_are_not_the_whole_product(tmp_path, monkeypatch):
    """A replay of one's own without constraints whose tables lack some configurations (those
    that were invalid when measured): Kernel Tuner is kept to the configurations in the data,
    where its simulation mode would otherwise stop at the first one its cache lacks."""
    pytest.importorskip("kernel_tuner")
    monkeypatch.delenv("MLKAPS_GPU_DATA", raising=False)
    config = _tiny_replay(tmp_path)
    for value in ("small", "large"):
        path = tmp_path / f"{value}.csv"
        table = pd.read_csv(path)
        table = table[~((table["tile"] >= 8) & (table["unroll"] == "no"))]  # 9 of 12 left
        table.to_csv(path, index=False)
    case = cases.load_case("mine", [], None, None, False, config)
    caches = peers.prepare_kernel_tuner_caches(case, tmp_path / "kt")
    _, meta = caches["small"]
    (restriction,) = peers.kernel_tuner_restrictions(case, meta)
    tile = meta["tune_params"]["tile"]
    assert restriction({"tile": 2, "unroll": 1}) and restriction({"tile": 8, "unroll": 1})
    assert not restriction({"tile": 8, "unroll": 0})  # "no" is coded 0: not in the data
    assert tile == [1, 2, 4, 8, 16, 32]
    rows = peers.run_kernel_tuner(case, caches, "random_sample", 6, 0)
    assert [row["status"] for row in rows] == ["ok", "ok"]
    assert all(0 < row["fraction"] <= 1 and row["n_evaluated"] == 6 for row in rows)
    (tmp_path / "full").mkdir()
    full = cases.load_case("tiny", [], None, None, False, _tiny_replay(tmp_path / "full"))
    caches = peers.prepare_kernel_tuner_caches(full, tmp_path / "kt_full")
    assert peers.kernel_tuner_restrictions(full, caches["small"][1]) is None  # whole product


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        ('[kernel]\nexecutor = "python"\n', "must be a replay kernel"),
        ('[kernel]\nexecutor = "replay"\nfiles = "one.csv"\n', "must be a replay kernel"),
        ("[kernel\n", "not valid TOML"),
    ],
)
def test_a_config_that_is_no_replay_is_refused(kernel, message, tmp_path, capsys):
    path = tmp_path / "mine.toml"
    path.write_text(kernel, encoding="utf-8")
    assert bench.main(["--config", str(path), "--results", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "mine.toml" in error and message in error
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_replay_config_with_bad_data_or_both_options_is_refused(tmp_path, capsys):
    config = _tiny_replay(tmp_path)
    (tmp_path / "large.csv").write_text("tile,time\n1,2.0\n", encoding="utf-8")
    assert bench.main(["--config", str(config), "--results", str(tmp_path / "out")]) == 2
    assert "large.csv: missing column(s) 'unroll'" in capsys.readouterr().err
    assert bench.main(["--config", str(config), "--case", "syr2k"]) == 2
    assert "not both" in capsys.readouterr().err
    assert bench.main(["--config", str(tmp_path / "absent.toml")]) == 2
    assert "absent.toml: cannot be read" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["--seeds", "0"], ["--first-seed", "-1"]])
def test_seed_options_out_of_range_are_refused(argv, monkeypatch, capsys):
    monkeypatch.setenv("MLKAPS_GPU_DATA", "unused")
    assert bench.main(argv) == 2
    assert "--first-seed" in capsys.readouterr().err
