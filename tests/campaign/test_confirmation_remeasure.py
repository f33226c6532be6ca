"""The confirmation measures again the answers that rest on one measurement of a kernel measured
live: a lucky first measurement (a timing that was fast once, as a busy or bimodal machine gives)
does not ship on its own word; a deterministic kernel stops it after one round."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from mlkaps_gpu.campaign import ConfirmationStage, StageContext
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
