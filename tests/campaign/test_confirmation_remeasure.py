"""The confirmation measures again the answers that rest on one measurement of a kernel measured
live: a lucky first measurement (a timing that was fast once, as a busy or bimodal machine gives)
does not ship on its own word; a deterministic kernel stops it after one round."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign import ConfirmationStage, StageContext
from mlkaps_gpu.campaign._decisions import Evidence
from tests.campaign.test_stages import (
    SPACE,
    FunctionExecutor,
    context,
    decisions,
    optima_of,
    sample,
    true_time,
)

#: The configuration whose first run at ``n = 512`` after the sampling measures 5 times faster
#: than it is.
LUCKY = {"n": 512, "block": 4, "variant": "b"}


class LuckyOnceExecutor(FunctionExecutor):
    """:class:`FunctionExecutor`, except that once ``armed``, the first run of ``LUCKY``
    measures ``true_time / 5``."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False

    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        self.measured += len(rows)
        times = true_time(rows)
        for i, row in enumerate(rows.to_dict("records")):
            if self.armed and all(row[k] == v for k, v in LUCKY.items()):
                self.armed = False
                times[i] /= 5.0
        return pd.DataFrame({"time": times, "status": "ok"})


def with_lucky_answer(tmp_path: Path) -> tuple[StageContext, pd.DataFrame, int]:
    """A sampled context whose grid point ``n = 512`` has one lucky measurement of ``LUCKY``
    (1.7; its true time 1 + (4 - 64)**2 / 512 + 0.5 = 8.5, the optimum 1.0)."""
    executor = LuckyOnceExecutor()
    ctx = context(tmp_path, executor)
    sample(ctx, 40)
    optima = optima_of(ctx)
    executor.armed = True
    lucky = pd.DataFrame([LUCKY])[SPACE.names]
    ctx.store.append(lucky, ctx.executor.run(lucky))
    return ctx, optima, len(ctx.store)


def answer_at_512(ctx: StageContext, stage: ConfirmationStage, optima: pd.DataFrame) -> dict:
    optima, fitted, details = stage.run(optima)
    answers = stage.decisions.answers(fitted.selector, optima)
    row = answers[answers["n"] == 512].iloc[0]
    return {"block": int(row["block"]), "variant": row["variant"], **details["confirmation"]}


def test_a_lucky_measurement_is_measured_again_and_the_answer_re_decided(tmp_path: Path) -> None:
    ctx, optima, stored = with_lucky_answer(tmp_path / "again")
    stage = ConfirmationStage(ctx, decisions(ctx), budget=stored + 8, batch_size=4, remeasure=True)
    answer = answer_at_512(ctx, stage, optima)
    assert answer["remeasured_answers"] >= 1
    assert (answer["block"], answer["variant"]) != (LUCKY["block"], LUCKY["variant"])
    repeated = ctx.store.load()
    lucky_rows = repeated[(repeated["n"] == 512) & (repeated["block"] == LUCKY["block"])]
    assert len(lucky_rows[lucky_rows["variant"] == LUCKY["variant"]]) == 2

    # without it (a replay), the one lucky measurement ships
    ctx, optima, stored = with_lucky_answer(tmp_path / "once")
    stage = ConfirmationStage(ctx, decisions(ctx), budget=stored + 8, batch_size=4)
    answer = answer_at_512(ctx, stage, optima)
    assert answer["remeasured_answers"] == 0
    assert (answer["block"], answer["variant"]) == (LUCKY["block"], LUCKY["variant"])


def test_a_deterministic_kernel_is_measured_again_for_one_round_only(tmp_path: Path) -> None:
    ctx = context(tmp_path, FunctionExecutor())
    sample(ctx, 40)
    optima = optima_of(ctx)
    stored = len(ctx.store)
    stage = ConfirmationStage(ctx, decisions(ctx), budget=stored + 20, batch_size=2, remeasure=True)
    _, _, details = stage.run(optima)
    spent = details["confirmation"]
    assert 1 <= spent["remeasured_answers"] <= 2
    assert spent["measured_neighbours"] > 0
    assert (
        spent["measured_answers"] + spent["remeasured_answers"] + spent["measured_neighbours"]
        == len(ctx.store) - stored
    )


class NoisyExecutor(FunctionExecutor):
    """:class:`FunctionExecutor` times a log-normal factor of sd 0.2 per run (a machine whose
    measurements differ from one time to another far more than within one)."""

    def __init__(self) -> None:
        super().__init__()
        self.rng = np.random.default_rng(0)

    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        self.measured += len(rows)
        times = true_time(rows) * np.exp(self.rng.normal(0.0, 0.2, len(rows)))
        return pd.DataFrame({"time": times, "status": "ok"})


def noise_stage(ctx: StageContext, *, remeasure: bool) -> ConfirmationStage:
    stage = decisions(ctx)
    stage.between_times = True
    budget = len(ctx.store) + 10
    return ConfirmationStage(
        ctx, stage, budget=budget, batch_size=2, remeasure=remeasure, noise_cells=6
    )


def test_noise_cells_are_measured_again_first_and_give_the_noise_between_times(
    tmp_path: Path,
) -> None:
    """Six cells measured once are measured again before the answers; their differences give
    the decisions the variance between times (0.2**2 in the log, estimated from 6 pairs), added
    to every measurement's standard error; a deterministic kernel gives none."""
    ctx = context(tmp_path / "noisy", NoisyExecutor())
    sample(ctx, 40)
    optima = optima_of(ctx)
    before = ctx.store.load()
    stage = noise_stage(ctx, remeasure=True)
    _, _, details = stage.run(optima)
    assert details["confirmation"]["noise_cells"] == 6
    after = ctx.store.load()
    again = after.iloc[len(before) : len(before) + 6][SPACE.names]
    assert len(again.merge(before[SPACE.names], on=SPACE.names)) == 6  # each measured before
    evidence = stage.decisions.evidence_score().evidence
    assert 0.2**2 / 4 < evidence.between < 0.2**2 * 4
    twice = evidence.table[evidence.table["_n"] == 2]
    assert (twice["_se"] >= np.sqrt(evidence.between / 2) - 1e-12).all()
    assert Evidence(after, SPACE, "time").between == 0.0  # not asked for: the repeats alone

    ctx = context(tmp_path / "exact", FunctionExecutor())
    sample(ctx, 40)
    stage = noise_stage(ctx, remeasure=True)
    stage.run(optima_of(ctx))
    assert stage.decisions.evidence_score().evidence.between == 0.0


def test_a_replay_measures_no_noise_cells(tmp_path: Path) -> None:
    """A replay gives the same value every time: no cell is measured again for the noise."""
    ctx = context(tmp_path, NoisyExecutor())
    sample(ctx, 40)
    _, _, details = noise_stage(ctx, remeasure=False).run(optima_of(ctx))
    assert "noise_cells" not in details["confirmation"]
