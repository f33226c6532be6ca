"""Measurements taken outside the campaign: ``[kernel] executor = "external"``.

The user's own loop (a batch scheduler, a remote machine, a lab instrument) measures the rows a
campaign asks for (``Campaign.ask``) and tells it the results (``Campaign.tell``). The executor
of such a campaign never runs anything; :func:`told_results` turns a table the user tells into
the result rows the store keeps.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlkaps_gpu.executors._base import OK, RUNTIME_ERROR, STATUSES, Executor, ExecutorError


class ExternalExecutor(Executor):
    """The executor of a campaign measured through ask / tell: running it is an error.

    Args:
        objectives: the objective columns the user tells.
    """

    def __init__(self, objectives: Sequence[str] = ("time",)) -> None:
        self.objectives = tuple(objectives)

    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        raise ExecutorError(
            'this campaign is measured outside (executor = "external"): measure the rows of '
            "Campaign.ask and give the results to Campaign.tell"
        )


def told_results(told: pd.DataFrame, objectives: Sequence[str]) -> pd.DataFrame:
    """The result rows (objectives, ``status``, ``n_repeats``, ``raw_times``, ``message``) of a
    table of told measurements.

    ``status`` is optional: without it a row is ``ok`` when every objective is a finite number
    and ``runtime_error`` otherwise; a given status must be one of the executor statuses. An
    ``ok`` row needs finite objectives; failed rows' objectives are ignored. ``message`` is
    optional.

    Raises:
        ExecutorError: a missing objective column, an unknown status, or an ``ok`` row without
            finite objectives (the message names the row).
    """
    missing = [name for name in objectives if name not in told]
    if missing:
        raise ExecutorError(f"tell: no column {missing[0]!r} (objectives: {list(objectives)})")
    values = np.column_stack(
        [pd.to_numeric(told[name], errors="coerce").to_numpy(np.float64) for name in objectives]
    )
    finite = np.all(np.isfinite(values), axis=1)
    if "status" in told:
        status = told["status"].astype(str).to_numpy(object)
        unknown = sorted(set(status) - set(STATUSES))
        if unknown:
            raise ExecutorError(f"tell: unknown status {unknown[0]!r} (allowed: {STATUSES})")
        broken = np.flatnonzero((status == OK) & ~finite)
        if len(broken):
            raise ExecutorError(
                f"tell: row {int(broken[0])} has status ok but no finite value of "
                f"{list(objectives)}"
            )
    else:
        status = np.where(finite, OK, RUNTIME_ERROR).astype(object)
    result = pd.DataFrame(
        {name: values[:, index] for index, name in enumerate(objectives)}, index=told.index
    )
    result["status"] = status
    result["n_repeats"] = (status == OK).astype(np.int64)
    result["raw_times"] = "[]"
    result["message"] = told["message"].astype(str) if "message" in told else ""
    return result.reset_index(drop=True)
