"""``[trees] max_configs``: the decisions rewritten to use a small portfolio of configurations,
chosen to lose the least (as Helion's autotuner keeps at most ten for all its shapes)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign._decisions import EvidenceScore, numeric_inputs
from mlkaps_gpu.space import Space

#: Most configurations :func:`limit_configurations` chooses its portfolio from (the decided
#: ones always; then the most measured ones).
PORTFOLIO_CANDIDATES = 256
#: Points at which a decided configuration must have been measured beside its replacement
#: before :func:`measured_loss` counts what dropping it costs (a replication).
REPLICATED = 2


def limit_configurations(
    decisions: pd.DataFrame, score: EvidenceScore, space: Space, limit: int
) -> pd.DataFrame:
    """The decisions rewritten to use at most ``limit`` distinct configurations.

    The portfolio is chosen greedily, as Helion's autotuner keeps a few configurations for
    all its shapes: among the decided configurations and the most measured ones (at most
    :data:`PORTFOLIO_CANDIDATES` beside the decided), first the one of best geometric mean
    pessimistic estimate over the grid points (:meth:`EvidenceScore.pessimistic`; a
    configuration unlisted or failed at a point counts as ``Evidence.penalty`` there), then
    repeatedly the one that lowers the sum over points of the best estimate in the portfolio
    the most. Every point then takes its portfolio member of best estimate. ``source`` and the
    measured and predicted columns are recomputed for the rewritten points (``measured``
    where the new configuration was measured there, else ``surrogate``).
    """
    if len(decisions[space.design_names].drop_duplicates()) <= limit:
        return decisions
    configurations, cost = _portfolio_cost(decisions, score, space)
    return _rewrite(decisions, configurations, cost, _greedy_portfolios(cost, limit)[-1], score)


def _portfolio_cost(
    decisions: pd.DataFrame, score: EvidenceScore, space: Space
) -> tuple[pd.DataFrame, np.ndarray]:
    """The configurations a portfolio is chosen from and their points x configurations
    pessimistic estimates (:func:`limit_configurations`)."""
    names, design = space.names, space.design_names
    decided = decisions[design].drop_duplicates()
    # candidates: the decided configurations, then the most measured others (a configuration
    # near the best everywhere is what a small portfolio needs, even if it is nowhere the best)
    measured = score.evidence.table.groupby(design, sort=False, dropna=False)["_n"].sum()
    measured = measured.sort_values(ascending=False, kind="stable").reset_index()[design]
    configurations = pd.concat([decided, measured], ignore_index=True).drop_duplicates()
    configurations = configurations.head(max(PORTFOLIO_CANDIDATES, len(decided)))
    configurations = configurations.reset_index(drop=True)
    points = decisions[space.input_names].reset_index(drop=True)
    n_points, n_configs = len(points), len(configurations)
    pairs = _every_pair(points, configurations, names)
    # only valid pairs are estimated (a table replay lists a few of its choices per point)
    valid = space.is_valid(pairs)
    cost: np.ndarray = np.full(len(pairs), score.evidence.penalty, dtype=np.float64)
    if valid.any():
        cost[valid] = score.pessimistic(pairs[valid])
    return configurations, cost.reshape(n_points, n_configs)


def _rewrite(
    decisions: pd.DataFrame,
    configurations: pd.DataFrame,
    cost: np.ndarray,
    chosen: list[int],
    score: EvidenceScore,
) -> pd.DataFrame:
    """The decisions with every point on its ``chosen`` member of least ``cost``."""
    space = score.evidence.space
    design = space.design_names
    member = np.array(chosen)[np.argmin(cost[:, chosen], axis=1)]
    out = decisions.reset_index(drop=True).copy()
    replaced = configurations.iloc[member].reset_index(drop=True)
    changed = ~(out[design].reset_index(drop=True) == replaced).all(axis=1).to_numpy()
    for name in design:
        out[name] = replaced[name].to_numpy()
        out[name] = out[name].astype(space.parameters[name].dtype)
    if changed.any():
        _refresh_estimates(out, changed, score)
    return out


def portfolio_size(decisions: pd.DataFrame, score: EvidenceScore, space: Space) -> int:
    """How many distinct configurations the evidence can tell apart (:func:`size_and_tolerance`)."""
    return size_and_tolerance(decisions, score, space)[0]


def size_and_tolerance(
    decisions: pd.DataFrame, score: EvidenceScore, space: Space
) -> tuple[int, float]:
    """How many distinct configurations the evidence can tell apart: the portfolio size whose
    decisions generalise best from one bootstrap replicate of the samples to another.

    The ensemble's bootstrap members are models of other draws of the same measurements. For
    each member in turn, portfolios of the decided configurations are chosen greedily (as in
    :func:`limit_configurations`) on the mean of the other members' predictions, one size after
    the other up to every decided configuration, and each point takes its member of best
    prediction; the member left out then scores those choices (its prediction of the chosen
    configuration against its own best one, mean over the grid points, model space). The size
    returned is the smallest whose loss, averaged over the members left out, is within one
    standard error of the least (the one-standard-error rule of CART's pruning); that standard
    error is returned beside the size, as the loss the rule tolerates (0 where it does not
    apply). A difference between configurations that only some draws of the noise show costs
    more on the draws that do not show it than it gains: more configurations than the
    evidence resolves lose on the member left out, and the trees no longer split on them.

    A measured (point, configuration) cell enters every member as its measured mean plus its
    standard error times a normal draw, not as the member's prediction: a difference the
    measurements hold is kept where few points hold it (a noise-free replay, or one measured
    optimum per value), and one within the measurements' noise is not.

    Inputs that are all categorical (one GPU, one data file per value) keep every decided
    configuration: each value has its own measurements, and no tree generalises between their
    values.
    """
    design = space.design_names
    decided = decisions[design].drop_duplicates().reset_index(drop=True)
    n_configs = len(decided)
    if n_configs <= 1 or not numeric_inputs(space):
        return n_configs, 0.0
    points = decisions[space.input_names].reset_index(drop=True)
    n_points = len(points)
    pairs = _every_pair(points, decided, space.names)
    valid = space.is_valid(pairs)
    if not valid.any():
        return n_configs, 0.0
    listed = pairs[valid]
    # only valid pairs are predicted (a table replay lists a few of its choices per point)
    predicted = score.evidence.sign * score.model.predict_members(
        score.feature_space.features(listed)
    )
    members: np.ndarray = np.full(
        (len(predicted), len(pairs)), score.evidence.penalty, dtype=np.float64
    )
    members[:, valid] = predicted
    # a measured cell is known in every draw up to its own noise: its mean plus its standard
    # error times a draw per member, so that the members disagree on it only as much as the
    # measurements do (fixed draws: the same campaign gives the same size)
    found = score.evidence.match(pairs)
    seen = found["_n"].to_numpy() > 0
    if seen.any():
        draws = np.random.default_rng(0).standard_normal(members.shape)[:, seen]
        mean, error = found["_f"].to_numpy()[seen], found["_se"].to_numpy()[seen]
        members[:, seen] = mean + error * draws
    blocked = ~valid
    blocked[valid] = score.ruled_out(listed)
    members = np.where(blocked, score.evidence.penalty, members)
    members = members.reshape(len(members), n_points, n_configs)
    rows = np.arange(n_points)
    loss = np.zeros((len(members), n_configs))
    for out in range(len(members)):
        chooser = np.delete(members, out, axis=0).mean(axis=0)
        judge = members[out]
        best = judge.min(axis=1)
        portfolios = _greedy_portfolios(chooser, n_configs)
        for size, chosen in enumerate(portfolios, start=1):
            pick = np.array(chosen)[np.argmin(chooser[:, chosen], axis=1)]
            loss[out, size - 1] = float(np.mean(judge[rows, pick] - best))
        loss[out, len(portfolios) :] = loss[out, len(portfolios) - 1]
    mean = loss.mean(axis=0)
    least = int(np.argmin(mean))
    error = loss[:, least].std(ddof=1) / np.sqrt(len(loss))
    return int(np.flatnonzero(mean <= mean[least] + error)[0]) + 1, float(error)


def auto_portfolio(decisions: pd.DataFrame, score: EvidenceScore, space: Space) -> pd.DataFrame:
    """``[trees] max_configs = "auto"``: the decisions within :func:`portfolio_size`
    configurations, grown one at a time while the measurements alone show the rewrite to lose
    more than the size rule tolerates (:func:`measured_loss`).

    The size rule judges portfolios on the ensemble's members, where a configuration decided
    at a few points weighs little beside the noise of the predictions at all the others. Where
    that configuration was measured beside the member that replaced it, the difference is no
    draw of a model: if those paired measurements, averaged over the grid points as the rule
    averages its loss, lose more than the one standard error the rule allowed, a larger
    portfolio is needed.
    """
    n_decided = len(decisions[space.design_names].drop_duplicates())
    limit, tolerance = size_and_tolerance(decisions, score, space)
    if limit >= n_decided:
        return decisions
    # one cost and one greedy order: the portfolio of each size is a prefix of the largest
    # (the greedy stops early where no candidate helps: a larger size rewrites the same way)
    configurations, cost = _portfolio_cost(decisions, score, space)
    portfolios = _greedy_portfolios(cost, n_decided - 1)
    for chosen in portfolios[min(limit, len(portfolios)) - 1 :]:
        limited = _rewrite(decisions, configurations, cost, chosen, score)
        if measured_loss(decisions, limited, score, space) <= tolerance:
            return limited
    return decisions


def measured_loss(
    before: pd.DataFrame, after: pd.DataFrame, score: EvidenceScore, space: Space
) -> float:
    """What the measurements alone say rewriting the decisions ``before`` into ``after``
    costs, over the number of points.

    At each rewritten point where both configurations were measured, the replacement's
    measured mean minus the decided one's (signed, model space: a gain where the replacement
    was measured faster). At a point where the confirmation's budget ended
    (:meth:`EvidenceScore.at_strict_points`), a measured decision rewritten to a configuration
    never measured there counts too, with the replacement's pessimistic estimate in place of
    a measurement (decision 0051). A decided configuration counts only where it was so paired
    at :data:`REPLICATED` points or more: one pair is one draw of each cell's noise (a table
    pass's outlier, a burst of interference), and no portfolio should grow on it."""
    design = space.design_names
    before = before.reset_index(drop=True)
    after = after.reset_index(drop=True)
    changed = ~(before[design] == after[design]).all(axis=1).to_numpy()
    if not changed.any():
        return 0.0
    rewritten = after.loc[changed, space.names].reset_index(drop=True)
    old = score.evidence.match(before.loc[changed, space.names])
    new = score.evidence.match(rewritten)
    old_seen, new_seen = old["_n"].to_numpy() > 0, new["_n"].to_numpy() > 0
    gap = new["_f"].to_numpy() - old["_f"].to_numpy()
    # where the confirmation's budget ended before the answers were measured (the points of
    # ``only_measured_at``), a measured decision rewritten to a configuration never measured
    # there trades a measurement for a guess: the guess's pessimistic estimate (the model's
    # calibrated uncertainty) against the measurement
    traded = old_seen & ~new_seen & score.at_strict_points(rewritten)
    if traded.any():
        gap[traded] = score.pessimistic(rewritten[traded]) - old["_f"].to_numpy()[traded]
    counted = (old_seen & new_seen) | traded
    gaps = before.loc[changed, design].reset_index(drop=True)[counted]
    gaps = gaps.assign(_gap=gap[counted])
    per_configuration = gaps.groupby(design, dropna=False)["_gap"].agg(["sum", "size"])
    replicated = per_configuration["size"] >= REPLICATED
    return float(per_configuration.loc[replicated, "sum"].sum()) / len(before)


def _every_pair(
    points: pd.DataFrame, configurations: pd.DataFrame, names: list[str]
) -> pd.DataFrame:
    """Every (point, configuration) row, point-major: point ``i`` with configuration ``j`` at
    row ``i * len(configurations) + j``."""
    n_points, n_configs = len(points), len(configurations)
    return pd.concat(
        [
            points.iloc[np.repeat(np.arange(n_points), n_configs)].reset_index(drop=True),
            configurations.iloc[np.tile(np.arange(n_configs), n_points)].reset_index(drop=True),
        ],
        axis=1,
    )[names]


def _greedy_portfolios(cost: np.ndarray, limit: int) -> list[list[int]]:
    """The greedy portfolios of every size from 1 to ``limit`` on a points x configurations
    cost: first the configuration of least summed cost, then each time the one that lowers the
    sum over points of the portfolio's best cost the most; none larger once no configuration
    lowers it."""
    chosen = [int(np.argmin(cost.sum(axis=0)))]
    best = cost[:, chosen[0]].copy()
    portfolios = [list(chosen)]
    while len(chosen) < limit:
        gain = np.maximum(best[:, None] - cost, 0.0).sum(axis=0)
        gain[chosen] = -1.0
        pick = int(np.argmax(gain))
        if gain[pick] <= 0:
            break
        chosen.append(pick)
        best = np.minimum(best, cost[:, pick])
        portfolios.append(list(chosen))
    return portfolios


def _refresh_estimates(out: pd.DataFrame, rows: np.ndarray, score: EvidenceScore) -> None:
    """Recompute, in place, the evidence columns of ``decide`` for the rewritten rows."""
    space = score.evidence.space
    objective = score.evidence.objective
    chosen = out.loc[rows, space.names]
    found = score.evidence.match(chosen)
    measured = found["_n"].to_numpy() > 0
    _, uncertainty, _, _ = score.estimate(chosen)
    if f"predicted_{objective}" in out:
        out.loc[rows, f"predicted_{objective}"] = score.predicted(chosen)
    if f"measured_{objective}" in out:
        out.loc[rows, f"measured_{objective}"] = np.where(
            measured, score.evidence.to_objective(found["_f"].to_numpy()), np.nan
        )
    if "uncertainty" in out:
        out.loc[rows, "uncertainty"] = uncertainty
    if "source" in out:
        failed = found["_failed"].to_numpy()
        out.loc[rows, "source"] = np.where(
            measured, "measured", np.where(failed, "failed", "surrogate")
        )
