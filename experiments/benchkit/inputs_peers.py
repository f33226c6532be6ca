"""The peers of the header over many input points, each drawing its measurements from a
:class:`~benchkit.inputs_truth.Truth` (a replay of it) and answering one configuration index per
point.

Budget ``B`` counts (point, configuration) cells, failed ones included. Every peer takes a
``numpy.random.Generator`` (seeded by the caller), so the same seed gives the same answers.

* :func:`best_single_full`: the one configuration with the best geomean over every point (full
  knowledge, no budget).
* :func:`best_single_from_cells`: ``B`` random cells; the configuration whose measured times are
  closest to the best measured at the same points (geomean of ``t / t_best sampled``).
* :func:`autotune_nearest`: tune ``k = B / (configurations per point)`` points fully, chosen by a
  space-filling rule (k-means medoids); answer each point with the fastest configuration of the
  nearest tuned point that the point lists.
* :func:`portfolio_tree`: Helion-style: the same tuned points, a portfolio of at most 10
  configurations chosen greedily for the worst slowdown over them, a depth-6 decision tree from
  the inputs to the portfolio configuration.
* :func:`lightgbm_argmin`: LightGBM on log time from input + design features, fitted on measured
  cells (random ones, or a campaign's samples); argmin over the listed configurations per point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from benchkit.inputs_truth import Truth, design_features, input_features, scaled_input_features

#: a configuration never measured (or failed) at a tuned point counts as this point's slowest
PORTFOLIO_SIZE = 10
TREE_DEPTH = 6
#: a failed cell's target in the model: the worst successful log time seen, plus log(2)
FAILURE_PENALTY = math.log(2.0)


def best_single_full(truth: Truth) -> int:
    """The configuration with the best geomean fraction of optimum over every point."""
    times = np.where(np.isfinite(truth.times), truth.times, truth.slowest[:, None])
    log_fraction = np.log(truth.optimum)[:, None] - np.log(times)
    return int(np.argmax(log_fraction.mean(axis=0)))


def random_cells(truth: Truth, budget: int, rng: np.random.Generator) -> np.ndarray:
    """``min(B, listed cells)`` distinct listed cells, as ``(point, config)`` index pairs."""
    points, configs = np.nonzero(truth.listed)
    size = min(int(budget), len(points))
    chosen = np.sort(rng.choice(len(points), size=size, replace=False))
    return np.column_stack([points[chosen], configs[chosen]])


def best_single_from_cells(truth: Truth, cells: np.ndarray) -> int:
    """The configuration whose sampled cells are closest to the best sampled at their points:
    mean of ``log(t / t_best sampled)`` over the points where at least two cells succeeded (a
    failed cell, or a configuration not listed at the point, counts as the point's slowest
    sampled time: which configurations a point lists is known without measuring).
    Configurations known at fewer points than half the median count are left out when others
    remain."""
    times = truth.times[cells[:, 0], cells[:, 1]]
    ok = np.isfinite(times)
    counted = pd.Series(cells[ok, 0]).value_counts()
    points = np.sort(counted.index[counted >= 2].to_numpy(dtype=np.int64))
    if len(points) == 0:  # too few cells to compare: the most measured configuration
        return int(pd.Series(cells[:, 1]).value_counts().index[0])
    row = {p: i for i, p in enumerate(points.tolist())}
    measured = np.full((len(points), len(truth.configs)), np.nan)
    keep = np.isin(cells[:, 0], points)
    rows = np.array([row[p] for p in cells[keep, 0].tolist()], dtype=np.int64)
    measured[rows, cells[keep, 1]] = times[keep]
    best = np.nanmin(np.where(np.isfinite(measured), measured, np.nan), axis=1)
    worst = np.nanmax(np.where(np.isfinite(measured), measured, np.nan), axis=1)
    measured = np.where(np.isinf(measured), worst[:, None], measured)
    measured = np.where(truth.listed[points], measured, worst[:, None])
    log_ratio = np.log(measured) - np.log(best)[:, None]
    known = np.isfinite(log_ratio).sum(axis=0)
    with np.errstate(invalid="ignore"):
        score = np.nansum(log_ratio, axis=0) / np.maximum(known, 1)
    enough = known >= max(1.0, float(np.median(known[known > 0])) / 2)
    score = np.where(enough & (known > 0), score, np.inf)
    return int(np.argmin(score))


def first_listed(truth: Truth, preference: np.ndarray) -> np.ndarray:
    """Per point, the first configuration of its preference order (``P x n`` indices) that is
    listed there; -1 where none is."""
    preference = np.asarray(preference, dtype=np.int64)
    listed = np.take_along_axis(truth.listed, preference, axis=1)
    first = np.argmax(listed, axis=1)
    answer = preference[np.arange(len(preference)), first]
    return np.where(listed.any(axis=1), answer, -1)


def space_filling_points(truth: Truth, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` point indices spread over where the points are: k-means in the scaled log
    space of the numeric inputs (categorical codes x 10, so that categories separate first),
    and per cluster the point nearest its centre. Farthest-point sampling was tried first: it
    tunes the extreme shapes of a table and, for the Helion-style tree on mixedmm_a100 at 2 %,
    scored 0.894 against 0.945 here."""
    from sklearn.cluster import KMeans

    numeric, categorical = scaled_input_features(truth)
    features = np.column_stack([numeric, 10.0 * categorical])
    count = min(int(count), truth.n_points)
    if count == truth.n_points:
        return rng.permutation(truth.n_points)
    model = KMeans(n_clusters=count, n_init=1, random_state=int(rng.integers(2**31 - 1)))
    labels = model.fit_predict(features)
    distance = model.transform(features)[np.arange(truth.n_points), labels]
    frame = pd.DataFrame({"cluster": labels, "distance": distance})
    chosen = frame.sort_values(["cluster", "distance"], kind="stable").groupby("cluster").head(1)
    return rng.permutation(chosen.index.to_numpy(dtype=np.int64))


def tuned_points(truth: Truth, budget: int, rng: np.random.Generator) -> np.ndarray:
    """The points a budget tunes fully: ``k = B / (mean listed configurations per point)``
    space-filling points, as many of them as fit in ``B`` (at least one)."""
    per_point = truth.listed.sum(axis=1)
    count = max(1, int(budget // max(1.0, float(per_point.mean()))))
    order = space_filling_points(truth, count, rng)
    spent = np.cumsum(per_point[order])
    keep = max(1, int(np.searchsorted(spent, budget, side="right")))
    return order[:keep]


def _slowdowns(truth: Truth, points: np.ndarray) -> np.ndarray:
    """``t / t_opt`` at the tuned points; a failed or unlisted cell is the point's slowest."""
    times = truth.times[points]
    times = np.where(np.isfinite(times), times, truth.slowest[points, None])
    return times / truth.optimum[points, None]


def nearest_tuned(truth: Truth, tuned: np.ndarray) -> np.ndarray:
    """The nearest tuned point of each point (scaled log distance; a categorical value that
    differs adds 1e6, so it matches whenever a tuned point has it)."""
    numeric, categorical = scaled_input_features(truth)
    gap = ((numeric[:, None, :] - numeric[None, tuned, :]) ** 2).sum(axis=2)
    mismatch = (categorical[:, None, :] != categorical[None, tuned, :]).sum(axis=2)
    return tuned[np.argmin(gap + 1e6 * mismatch, axis=1)]


def autotune_nearest(truth: Truth, budget: int, rng: np.random.Generator) -> np.ndarray:
    """Tune k points fully; each point gets the fastest configuration of its nearest tuned point
    that the point lists (failed and unlisted ones last)."""
    tuned = tuned_points(truth, budget, rng)
    times = np.where(np.isfinite(truth.times), truth.times, np.inf)
    ranking = np.argsort(times[nearest_tuned(truth, tuned)], axis=1, kind="stable")
    return first_listed(truth, ranking)


def greedy_portfolio(slowdown: np.ndarray, size: int = PORTFOLIO_SIZE) -> list[int]:
    """At most ``size`` configurations (columns), each added for the lowest worst slowdown over
    the rows (ties: the lowest mean log slowdown); stops once every row has its optimum."""
    chosen: list[int] = []
    current = np.full(slowdown.shape[0], np.inf)
    while len(chosen) < min(size, slowdown.shape[1]):
        candidate = np.minimum(current[:, None], slowdown)
        worst = candidate.max(axis=0)
        mean_log = np.log(candidate).mean(axis=0)
        worst[chosen] = np.inf
        best_worst = worst.min()
        ties = np.flatnonzero(np.isclose(worst, best_worst, rtol=1e-12, atol=0.0))
        pick = int(ties[np.argmin(mean_log[ties])])
        chosen.append(pick)
        current = candidate[:, pick]
        if current.max() <= 1.0 + 1e-12:
            break
    return chosen


def portfolio_tree(truth: Truth, budget: int, rng: np.random.Generator) -> np.ndarray:
    """Helion-style: tuned points, a portfolio of <= 10 configurations for the worst slowdown,
    a depth-6 tree from the inputs (log numeric, categorical codes) to the portfolio entry."""
    from sklearn.tree import DecisionTreeClassifier

    tuned = tuned_points(truth, budget, rng)
    slowdown = _slowdowns(truth, tuned)
    portfolio = np.array(greedy_portfolio(slowdown), dtype=np.int64)
    labels = portfolio[np.argmin(slowdown[:, portfolio], axis=1)]
    if len(np.unique(labels)) == 1:
        return np.full(truth.n_points, labels[0], dtype=np.int64)
    tree = DecisionTreeClassifier(max_depth=TREE_DEPTH, random_state=int(rng.integers(2**31 - 1)))
    tree.fit(input_features(truth, truth.inputs.iloc[tuned]), labels)
    # the portfolio entries by the leaf's class share; the first one the point lists
    share = tree.predict_proba(input_features(truth, truth.inputs))
    ranking = tree.classes_[np.argsort(-share, axis=1, kind="stable")]
    return first_listed(truth, ranking)


def lightgbm_argmin(
    truth: Truth,
    samples: pd.DataFrame,
    times: np.ndarray,
    *,
    seed: int,
) -> np.ndarray:
    """Fit LightGBM on ``log(time)`` of the measured ``samples`` (input and design columns;
    ``times`` non-finite = failed, target: the worst successful log time plus log 2) and answer
    the listed configuration of lowest prediction at every point of the truth."""
    from lightgbm import LGBMRegressor

    times = np.asarray(times, dtype=np.float64)
    ok = np.isfinite(times) & (times > 0)
    if not ok.any():
        return np.full(truth.n_points, -1, dtype=np.int64)
    target = np.where(ok, np.log(np.where(ok, times, 1.0)), 0.0)
    target[~ok] = target[ok].max() + FAILURE_PENALTY
    features = np.column_stack([input_features(truth, samples), design_features(truth, samples)])
    model = LGBMRegressor(
        n_estimators=300,
        learning_rate=0.05,
        num_leaves=31,
        min_child_samples=5,
        subsample=0.8,
        subsample_freq=1,
        colsample_bytree=0.9,
        random_state=seed,
        n_jobs=1,
        verbose=-1,
    )
    model.fit(features, target)
    return _argmin_over_listed(truth, model)


def _argmin_over_listed(truth: Truth, model: object) -> np.ndarray:
    points, configs = np.nonzero(truth.listed)
    inputs = input_features(truth, truth.inputs)
    designs = design_features(truth, truth.configs)
    rows = np.column_stack([inputs[points], designs[configs]])
    predicted = np.full(truth.times.shape, np.inf)
    predicted[points, configs] = model.predict(rows)  # type: ignore[attr-defined]
    return np.argmin(predicted, axis=1).astype(np.int64)


def cells_table(truth: Truth, cells: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """The input and design columns of ``cells`` and their times."""
    table = pd.concat(
        [
            truth.inputs.iloc[cells[:, 0]].reset_index(drop=True),
            truth.configs.iloc[cells[:, 1]].reset_index(drop=True),
        ],
        axis=1,
    )
    return table, truth.times[cells[:, 0], cells[:, 1]]


def peer_answers(
    truth: Truth, budget: int, rng: np.random.Generator, *, include: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """Every budgeted peer's answers (names as in the results tables)."""
    cells = random_cells(truth, budget, np.random.default_rng(rng.integers(2**63 - 1)))
    peers = {
        "best single configuration (from B random cells)": lambda: np.full(
            truth.n_points, best_single_from_cells(truth, cells), dtype=np.int64
        ),
        "autotune k inputs + nearest neighbour": lambda: autotune_nearest(
            truth, budget, np.random.default_rng(rng.integers(2**63 - 1))
        ),
        "Helion-style portfolio + tree": lambda: portfolio_tree(
            truth, budget, np.random.default_rng(rng.integers(2**63 - 1))
        ),
        "random cells + LightGBM argmin": lambda: lightgbm_argmin(
            truth, *cells_table(truth, cells), seed=int(rng.integers(2**31 - 1))
        ),
    }
    return {name: make() for name, make in peers.items() if include is None or name in include}
