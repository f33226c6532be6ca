"""Drive a campaign's sampling from your own measurement loop: ``ask`` / ``tell``.

    campaign = Campaign.create_or_resume(load_config("campaign.toml"), "runs/mine")
    while not campaign.sampling_complete():
        rows = campaign.ask()              # a DataFrame of configurations to measure
        rows["time"] = [measure(**row) for row in rows.to_dict("records")]
        campaign.tell(rows)                # stored at once: a killed loop resumes from here
    campaign.run()                         # surrogate, optimization, trees, verified header

``ask`` gives at most ``[sampling] batch_size`` rows and never more than the budget left; the
sampler is the configured one (GA-Adaptive learns from every told row). ``tell`` takes the asked
columns plus the objectives (and optionally ``status`` and ``message`` for failures) and appends
them to the store in one transaction, like a measured batch. A campaign whose kernel runs in the
campaign (python, cffi, ...) can be told measurements too; ``executor = "external"`` is the
kind for campaigns measured only this way.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign._stage_sampling import restore_sampler
from mlkaps_gpu.executors import ExecutorError, told_results
from mlkaps_gpu.sampling import Sampler

if TYPE_CHECKING:
    from mlkaps_gpu.campaign._campaign import Campaign


#: Each campaign's sampler, built on the first ask or tell and kept while the campaign lives.
_SAMPLERS: weakref.WeakKeyDictionary[Campaign, Sampler] = weakref.WeakKeyDictionary()


class AskTellError(ValueError):
    """A call of ask / tell that cannot be honoured (the message says what to do)."""


def _sampler(campaign: Campaign) -> Sampler:
    """The campaign's sampler, built once and told every stored measurement."""
    sampler = _SAMPLERS.get(campaign)
    if sampler is None:
        sampler = campaign.make_sampler()
        restore_sampler(sampler, campaign.store)
        _SAMPLERS[campaign] = sampler
    return sampler


def remaining(campaign: Campaign) -> int:
    """Measurements still to tell before the sampling budget is spent."""
    return max(0, campaign.sampling_budget - len(campaign.store))


def ask(campaign: Campaign, n: int | None = None) -> pd.DataFrame:
    """Up to ``n`` (default ``batch_size``) valid configurations to measure (module docstring).

    Raises:
        AskTellError: the sampling stage is complete, or ``n`` is not positive.
    """
    if campaign.done("sampling") or remaining(campaign) == 0:
        raise AskTellError(
            f"{campaign.directory}: the sampling budget is spent; run the remaining stages "
            "(campaign.run(), or mlkaps-gpu tune on the same directory)"
        )
    n = campaign.config.sampling.batch_size if n is None else int(n)
    if n < 1:
        raise AskTellError(f"ask: n must be positive, got {n}")
    rows = _sampler(campaign).ask(min(n, remaining(campaign)))
    return rows[campaign.space.names].reset_index(drop=True)


def tell(campaign: Campaign, measurements: pd.DataFrame) -> int:
    """Store measured rows (module docstring); returns how many were stored.

    Raises:
        AskTellError: a missing column, a configuration outside the space, an unknown status, an
            ``ok`` row without finite objectives, or more rows than the budget has left.
    """
    if campaign.done("sampling"):
        raise AskTellError(f"{campaign.directory}: the sampling stage is complete")
    space = campaign.space
    missing = [name for name in space.names if name not in measurements]
    if missing:
        raise AskTellError(f"tell: no column {missing[0]!r} (the asked columns: {space.names})")
    if len(measurements) > remaining(campaign):
        raise AskTellError(
            f"tell: {len(measurements)} rows but only {remaining(campaign)} left in the budget"
        )
    rows = measurements[space.names].reset_index(drop=True)
    valid = campaign.sampling_space.is_valid(rows)
    if not np.all(valid):
        first = int(np.flatnonzero(~valid)[0])
        raise AskTellError(
            f"tell: row {first} {rows.iloc[first].to_dict()} is not a valid configuration of "
            "the campaign's space"
        )
    try:
        results = told_results(measurements.reset_index(drop=True), campaign.setup.objectives)
    except ExecutorError as error:
        raise AskTellError(str(error)) from None
    campaign.store.append(rows, results)
    _sampler(campaign).tell(rows, results)
    return len(rows)
