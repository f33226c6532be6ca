"""Decisions from evidence on a synthetic replay (issue 18, Done when 3): five values of a
categorical input, each with its own optimum; with the default settings and 40 evaluations per
value the header ships five different configurations, each the best the campaign measured for
its value."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign, parse_config
from mlkaps_gpu.codegen import CompiledHeader

#: Per input value: its optimum, one parameter away from the shared bowl's centre (4, 4, "x"),
#: 5 % faster than the centre (g0's optimum is the centre itself): a tree that merges two values
#: loses 5 % on one of them, under 1 % on average over the five, which a predicted-regret
#: tolerance of 1 % lets through.
OPTIMA = {
    "g0": (4, 4, "x"),
    "g1": (5, 4, "x"),
    "g2": (3, 4, "x"),
    "g3": (4, 5, "x"),
    "g4": (4, 3, "x"),
}
A_VALUES = list(range(1, 9))
B_VALUES = list(range(1, 9))
VARIANTS = ["x", "y", "z"]


def landscape(value: str) -> pd.DataFrame:
    """Every configuration's time at one input value: a smooth bowl shared by every value, the
    wrong variant 15 % slower, and the value's own optimum 5 % below the bowl."""
    a, b, variant = np.meshgrid(A_VALUES, B_VALUES, VARIANTS, indexing="ij")
    a, b, variant = a.ravel(), b.ravel(), variant.ravel()
    time = 2.0 + 0.1 * ((a - 4) ** 2 + (b - 4) ** 2) + np.where(variant == "x", 0.0, 0.3)
    a_best, b_best, variant_best = OPTIMA[value]
    if (a_best, b_best) != (4, 4):
        time = time - 0.2 * ((a == a_best) & (b == b_best) & (variant == variant_best))
    return pd.DataFrame({"a": a, "b": b, "variant": variant, "objective": time})


def write_case(folder: Path, per_value: int, seed: int) -> str:
    tables = {value: landscape(value) for value in OPTIMA}
    return case_text(folder, tables, budget=per_value * len(OPTIMA), seed=seed)


def case_text(
    folder: Path, tables: dict[str, pd.DataFrame], budget: int, seed: int, confirm: float = 0.1
) -> str:
    """The configuration replaying ``tables`` (one CSV per value of ``gpu``)."""
    files = []
    for value, table in tables.items():
        path = folder / f"{value}.csv"
        table.to_csv(path, index=False)
        files.append(f'{value} = "{path}"')
    return f"""
[campaign]
name = "five_optima"
seed = {seed}

[kernel]
executor = "replay"
format = "csv"
objective = "time"
design_columns = ["a", "b", "variant"]
files = {{ gpu = {{ {", ".join(files)} }} }}

[objectives]
time = "minimize"

[sampling]
budget = {budget}
confirm = {confirm}

[trees]
prefix = "five"
verify_inputs = 500
"""


def run_case(folder: Path, text: str) -> Campaign:
    """Create and run the campaign of ``text`` in ``folder``."""
    config = parse_config(text, path=folder / "case.toml", label="case.toml")
    campaign = Campaign.create_or_resume(config, folder / "run")
    campaign.run()
    return campaign


def shipped_by(campaign: Campaign, folder: Path, values: list[str]) -> pd.DataFrame:
    """The compiled header's configuration for each value of ``gpu`` (design columns)."""
    compiled = CompiledHeader(
        campaign.load_selector(),
        campaign.header_path.read_text(),
        prefix="five",
        build_dir=folder / "build",
    )
    return compiled(pd.DataFrame({"gpu": values}))


#: The default run checks the first seed; the others (12 s each) run with the slow tests.
OTHER_SEEDS = pytest.mark.slow


@pytest.mark.compiler
@pytest.mark.parametrize(
    "seed", [0, pytest.param(1, marks=OTHER_SEEDS), pytest.param(2, marks=OTHER_SEEDS)]
)
def test_five_values_get_five_configurations(tmp_path: Path, seed: int) -> None:
    campaign = run_case(tmp_path, write_case(tmp_path, per_value=40, seed=seed))
    assert len(campaign.store) == 200  # sampling and confirmation together spend the budget

    values = list(OPTIMA)
    shipped = shipped_by(campaign, tmp_path, values)
    assert len(shipped.drop_duplicates()) == 5

    # each shipped configuration is the best measured for its value (replay: no noise)
    samples = campaign.store.valid_samples()
    for index, value in enumerate(values):
        mine = samples[samples["gpu"] == value]
        best = mine.loc[mine["time"].idxmin(), ["a", "b", "variant"]].tolist()
        assert shipped.iloc[index][["a", "b", "variant"]].tolist() == best, value

    # optima.csv: measured beside predicted, for the shipped configuration
    optima = pd.read_csv(campaign.directory / "optima.csv")
    assert {"predicted_time", "measured_time", "best_measured_time"} <= set(optima.columns)
    assert np.allclose(optima["measured_time"], optima["best_measured_time"])
    report = json.loads((campaign.directory / "verification.json").read_text())
    assert report["measured_regret"]["known"] == 5
    assert report["measured_regret"]["max"] <= 0.01
    assert len(report["per_point"]) == 5
    # a replay measures the same value every time: no answer is measured again
    assert report["confirmation"]["remeasured_answers"] == 0
    keys = samples[["gpu", "a", "b", "variant"]]
    assert not keys.duplicated().any()


def write_failing_case(folder: Path, seed: int) -> str:
    """Two values of ``gpu`` on the shared bowl; on g1 the bowl's centre, g0's optimum and the
    surrogate's favourite there, fails (an empty objective cell: a failed run)."""
    failing = landscape("g0")
    centre = (failing["a"] == 4) & (failing["b"] == 4) & (failing["variant"] == "x")
    failing.loc[centre, "objective"] = np.nan
    return case_text(folder, {"g0": landscape("g0"), "g1": failing}, budget=60, seed=seed)


@pytest.mark.compiler
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=OTHER_SEEDS)])
def test_a_configuration_that_failed_there_is_not_shipped(tmp_path: Path, seed: int) -> None:
    campaign = run_case(tmp_path, write_failing_case(tmp_path, seed))
    samples = campaign.store.load()
    centre = (samples["a"] == 4) & (samples["b"] == 4) & (samples["variant"] == "x")
    failed_here = samples[centre & (samples["gpu"] == "g1")]
    assert len(failed_here) == 1, "the failed centre on g1 is measured once, not confirmed again"
    assert (failed_here["status"] != "ok").all()

    shipped = shipped_by(campaign, tmp_path, ["g0", "g1"])
    assert shipped.iloc[0][["a", "b", "variant"]].tolist() == [4, 4, "x"]
    assert shipped.iloc[1][["a", "b", "variant"]].tolist() != [4, 4, "x"]
    report = json.loads((campaign.directory / "verification.json").read_text())
    assert report["measured_regret"]["failed"] == 0
    assert report["measured_regret"]["known"] == 2
    optima = pd.read_csv(campaign.directory / "optima.csv")
    assert not optima["header_failed"].any()


@pytest.mark.compiler
def test_an_answer_the_budget_could_not_confirm_is_not_shipped(tmp_path: Path) -> None:
    """The confirmation has one evaluation (2.5 % of 40) and, in this seed, ends with an answer
    never measured at its value (shipped before the fix): where that value has measurements, a
    measured configuration ships instead. The seed is one that ends so: seed 1 (seed 12 while
    the inputs' baseline of decision record 0036 also took categorical inputs alone, seed 7
    with the regret partition; at some seeds the case arises, but the refitted trees ship the
    bowl's centre unmeasured at one value, where the model is confident beyond its calibrated
    error, and rightly: it is faster there than the configuration measured); the assertions
    below check that the case arises."""
    tables = {value: landscape(value) for value in OPTIMA}
    campaign = run_case(tmp_path, case_text(tmp_path, tables, budget=40, seed=1, confirm=0.025))
    report = json.loads((campaign.directory / "verification.json").read_text())
    assert report["confirmation"]["unconfirmed_answers"] >= 1
    assert report["confirmation"]["measured_instead"] >= 1

    values = list(OPTIMA)
    shipped = pd.concat(
        [pd.DataFrame({"gpu": values}), shipped_by(campaign, tmp_path, values)], axis=1
    )
    measured = campaign.store.valid_samples()[["gpu", "a", "b", "variant"]].drop_duplicates()
    found = shipped.merge(measured, how="left", indicator=True)
    assert (found["_merge"] == "both").all(), found
    assert report["measured_regret"]["known"] == 5


@pytest.mark.compiler
def test_a_replay_with_holes_measures_only_what_its_data_hold(tmp_path: Path) -> None:
    """Data that lack part of the design product and no constraint that says which (a replay
    of one's own, say): the campaign never measures a configuration the data do not hold, where
    each would have been an invalid result that costs an evaluation and teaches nothing."""
    tables = {}
    for value in ("g0", "g1"):
        table = landscape(value)
        tables[value] = table[(table["a"] + table["b"]) % 3 != 0]  # a third of the product gone
    text = case_text(tmp_path, tables, budget=60, seed=0)
    campaign = run_case(tmp_path, text)
    samples = campaign.store.load()
    assert len(samples) == 60
    assert set(samples["status"]) == {"ok"}
    assert ((samples["a"] + samples["b"]) % 3 != 0).all()
    name, designs = campaign.setup.executor.known_designs()
    assert name == "gpu" and [len(t) for t in designs.values()] == [len(t) for t in tables.values()]
