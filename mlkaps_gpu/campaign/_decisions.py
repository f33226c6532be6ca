"""Decisions from evidence: the configuration each grid point ships, and what it is worth.

A grid point's candidates are the grid optimizer's choice (the surrogate's predicted optimum),
every configuration measured at the point's exact inputs, and the incumbents (best measured
configurations) of the input points measured repeatedly (a categorical GPU input...), valid
there. Each candidate gets an estimate in the objective's model space (``log`` of a positive
objective): where it was measured, the measurement (its mean, and its standard error from the
raw repeat times, at least ``NOISE_FLOOR``); elsewhere the mean and spread of a
:class:`~mlkaps_gpu.surrogate.BootstrapEnsemble`. The decision is the candidate of lowest
*pessimistic* estimate ``mean + kappa * uncertainty``: among measured configurations the best
one, unless it is noisier than a slightly slower one; an unmeasured configuration replaces it
only when the model is confident it is better, which guards against the optimizer's curse (the
argmin of a model over thousands of configurations is where the model errs low). A
configuration that failed at a point's inputs (a run-time error, a timeout) and never succeeded
there is never its decision while the point has another candidate, and scores worse than
anything measured (``Evidence.penalty``), so that no tree leaf ships it there either.

:class:`EvidenceScore` gives the trees the same pessimistic estimate as their score, so the
regret a depth is judged by is measured where a configuration was measured, and
:meth:`EvidenceScore.measured_regret` gives the regret that measurements alone establish
(NaN where the configuration or the point's decision was not measured), which the depth
selection never lets exceed its tolerance.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlkaps_gpu.space import Space
from mlkaps_gpu.surrogate import BootstrapEnsemble

#: Weight of the uncertainty in the pessimistic estimate ``mean + kappa * uncertainty``.
DECIDE_KAPPA = 1.0
#: Smallest relative standard error assumed for a measurement (timer resolution, drift).
NOISE_FLOOR = 0.005
#: Most incumbents of other input points carried to a grid point as candidates.
GLOBAL_CANDIDATES = 16


def _relative_standard_error(raw: object, n_repeats: object) -> float:
    """Standard error of a measurement's mean relative to the mean, from its raw repeats."""
    try:
        values = np.asarray(json.loads(str(raw)), dtype=np.float64).reshape(-1)
    except (ValueError, TypeError):
        return NOISE_FLOOR
    values = values[np.isfinite(values)]
    if len(values) < 2 or values.mean() == 0:
        return NOISE_FLOOR
    error = float(values.std(ddof=1) / abs(values.mean()) / math.sqrt(len(values)))
    return max(NOISE_FLOOR, error)


class Evidence:
    """Successful measurements of one objective, aggregated per configuration (inputs and
    design), in the model space: ``f = log(y)`` when every value is positive (``log_space``),
    else ``y``; then signed (``sign * f`` is minimised).

    Attributes:
        table: one row per measured configuration: its columns, ``_f`` (signed mean of ``f``),
            ``_se`` (standard error of ``_f``) and ``_n`` (measurements).
        failed_table: the configurations (inputs and design) that failed every time they ran.
        log_space: whether ``f`` is the log.
        penalty: the signed model-space value a failed configuration counts as: the worst
            measured value plus the measured range (at least 1: ``e`` times slower in the log
            space), worse than anything measured.
    """

    def __init__(
        self,
        samples: pd.DataFrame,
        space: Space,
        objective: str,
        *,
        maximize: bool = False,
    ) -> None:
        self.space = space
        self.objective = objective
        self.sign = -1.0 if maximize else 1.0
        good = (samples["status"] == "ok") & np.isfinite(samples[objective])
        ok = samples[good]
        values = ok[objective].to_numpy(dtype=np.float64)
        self.log_space = bool(len(values)) and bool(np.all(values > 0))
        relative = np.array(
            [
                _relative_standard_error(raw, n)
                for raw, n in zip(
                    ok.get("raw_times", pd.Series([None] * len(ok))),
                    ok.get("n_repeats", pd.Series([None] * len(ok))),
                    strict=True,
                )
            ],
            dtype=np.float64,
        )
        if self.log_space:
            f, se = np.log(values), relative
        else:
            f, se = values, relative * np.abs(values)
        frame = ok[space.names].reset_index(drop=True).assign(_f=self.sign * f, _v=se**2, _n=1)
        grouped = frame.groupby(space.names, sort=False, dropna=False)
        table = grouped.agg(_f=("_f", "mean"), _v=("_v", "mean"), _n=("_n", "sum"))
        table["_se"] = np.sqrt(table["_v"] / table["_n"])
        self.table = table.drop(columns="_v").reset_index()
        failed = samples.loc[~good, space.names].drop_duplicates()
        failed = failed.merge(self.table[space.names], on=space.names, how="left", indicator=True)
        self.failed_table = failed.loc[failed["_merge"] == "left_only", space.names]
        self.failed_table = self.failed_table.reset_index(drop=True)
        # measured and failed configurations, matched against any table in one merge
        self._known = pd.concat(
            [self.table.assign(_failed=False), self.failed_table.assign(_failed=True)],
            ignore_index=True,
        )
        signed = self.table["_f"].to_numpy(dtype=np.float64)
        worst = float(signed.max()) if len(signed) else 0.0
        spread = float(signed.max() - signed.min()) if len(signed) else 0.0
        self.penalty = worst + max(spread, 1.0 if self.log_space else abs(worst), 1e-12)

    def to_objective(self, signed: np.ndarray) -> np.ndarray:
        """Objective values from signed model-space values."""
        f = self.sign * np.asarray(signed, dtype=np.float64)
        return np.exp(f) if self.log_space else f

    def match(self, table: pd.DataFrame) -> pd.DataFrame:
        """Per row of ``table`` (same order): ``_f``, ``_se``, ``_n`` as in :attr:`table`
        (NaN, NaN, 0 where never measured) and ``_failed`` (failed every time it ran)."""
        names = self.space.names
        keys = table[names].reset_index(drop=True).assign(_row=np.arange(len(table)))
        merged = keys.merge(self._known, on=names, how="left").sort_values("_row")
        return pd.DataFrame(
            {
                "_f": merged["_f"].to_numpy(dtype=np.float64),
                "_se": merged["_se"].to_numpy(dtype=np.float64),
                "_n": merged["_n"].fillna(0).to_numpy(dtype=np.int64),
                "_failed": merged["_failed"].fillna(False).to_numpy(dtype=bool),
            }
        )

    def lookup(self, table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row: signed measured mean ``_f``, its standard error and the measurement count
        (NaN, NaN, 0 where the configuration was never measured)."""
        found = self.match(table)
        return found["_f"].to_numpy(), found["_se"].to_numpy(), found["_n"].to_numpy()

    def failed(self, table: pd.DataFrame) -> np.ndarray:
        """Per row: whether the configuration failed at those inputs every time it ran."""
        return self.match(table)["_failed"].to_numpy()

    def tried(self, table: pd.DataFrame) -> np.ndarray:
        """Per row: whether the configuration ran at those inputs (measured or failed)."""
        found = self.match(table)
        return (found["_n"] > 0).to_numpy() | found["_failed"].to_numpy()

    def incumbents(self, limit: int = GLOBAL_CANDIDATES) -> pd.DataFrame:
        """Best measured configuration of every input point measured at least twice, best
        (lowest signed value) first, at most ``limit``."""
        inputs = self.space.input_names
        table = self.table
        if table.empty:
            return table
        counts = table.groupby(inputs, sort=False, dropna=False)["_n"].transform("size")
        repeated = table[counts.to_numpy() >= 2]
        best = repeated.sort_values("_f", kind="stable").drop_duplicates(inputs)
        return best.head(limit).reset_index(drop=True)


class EvidenceScore:
    """Estimates of configurations from measurements and a bootstrapped ensemble.

    Args:
        evidence: the measurements.
        model: an ensemble fitted in the same model space (``log_target == log_space``).
        feature_space: the space whose features the model was trained on.
        kappa: weight of the uncertainty in the pessimistic estimate.
        strict: input points (rows of the input columns) where a configuration never measured
            there counts as ``Evidence.penalty``, as a failed one does (see
            :meth:`only_measured_at`).
    """

    def __init__(
        self,
        evidence: Evidence,
        model: BootstrapEnsemble,
        feature_space: Space,
        *,
        kappa: float = DECIDE_KAPPA,
        strict: pd.DataFrame | None = None,
    ) -> None:
        self.evidence = evidence
        self.model = model
        self.feature_space = feature_space
        self.kappa = kappa
        self.strict = strict

    def only_measured_at(self, points: pd.DataFrame) -> EvidenceScore:
        """The same estimates, except that at those of ``points`` (input rows) where some
        configuration was measured, a configuration never measured there counts as
        ``Evidence.penalty``: its decision is a measured configuration and no tree leaf ships
        another there. The confirmation asks this where the budget ended before the trees'
        answer was measured: a measured configuration rather than an unconfirmed guess."""
        inputs = self.evidence.space.input_names
        measured = self.evidence.table[inputs].drop_duplicates()
        strict = points[inputs].drop_duplicates().merge(measured, on=inputs)
        return EvidenceScore(
            self.evidence, self.model, self.feature_space, kappa=self.kappa, strict=strict
        )

    def estimate(
        self, table: pd.DataFrame
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Signed model-space estimate, its uncertainty, whether each row was measured and
        whether it is ruled out: the measurement and its standard error where there is one,
        ``Evidence.penalty`` (no uncertainty; ruled out) where the configuration only ever
        failed there or was never measured at a ``strict`` point, else the ensemble's mean and
        spread. (Not a precision-weighted
        blend: the members' spread is no calibrated error of the model at one configuration,
        and a blend let a smooth model pull a measured 5 % better configuration back to its
        neighbours' level.)"""
        sign = self.evidence.sign
        mean, sd = self.model.predict_log(self.feature_space.features(table))
        mean = sign * mean
        sd = np.maximum(sd, 1e-12)
        found = self.evidence.match(table)
        seen = found["_n"].to_numpy() > 0
        out = found["_failed"].to_numpy()
        if self.strict is not None and len(self.strict):
            inputs = self.evidence.space.input_names
            rows = table[inputs].reset_index(drop=True)
            flag = rows.merge(self.strict.assign(_strict=True), on=inputs, how="left")["_strict"]
            out = out | (flag.fillna(False).to_numpy(dtype=bool) & ~seen)
        mean = np.where(out, self.evidence.penalty, mean)
        sd = np.where(out, 0.0, sd)
        return np.where(seen, found["_f"], mean), np.where(seen, found["_se"], sd), seen, out

    def pessimistic(self, table: pd.DataFrame) -> np.ndarray:
        """Signed ``mean + kappa * uncertainty`` per row."""
        mean, uncertainty, _, _ = self.estimate(table)
        return mean + self.kappa * uncertainty

    def score(self, table: pd.DataFrame) -> np.ndarray:
        """The pessimistic estimate as a minimised objective value (the trees' score)."""
        return self.evidence.sign * self.evidence.to_objective(self.pessimistic(table))

    def predicted(self, table: pd.DataFrame) -> np.ndarray:
        """The ensemble's prediction of the objective (geometric mean of the members)."""
        return np.asarray(self.model.predict(self.feature_space.features(table)))

    def measured_regret(self, table: pd.DataFrame, decisions: pd.DataFrame) -> np.ndarray:
        """Relative regret of each row's configuration against the decision at the same
        inputs (``decisions`` aligned with ``table``), from measurements only (NaN where
        either was not measured), clipped at zero."""
        mine, _, mine_n = self.evidence.lookup(table)
        best, _, best_n = self.evidence.lookup(decisions)
        value = self.evidence.to_objective(mine)
        reference = self.evidence.to_objective(best)
        regret = self.evidence.sign * (value - reference) / np.abs(reference)
        known = (mine_n > 0) & (best_n > 0)
        return np.where(known, np.maximum(regret, 0.0), np.nan)


def decide(
    optima: pd.DataFrame,
    score: EvidenceScore,
    space: Space,
    objective: str,
) -> pd.DataFrame:
    """The configuration each grid point ships (see the module docstring).

    Args:
        optima: the grid optimizer's table (inputs, design, ``predicted_<objective>``,
            ``n_valid``), one row per grid point.
        score: the evidence.
        space: the full space.
        objective: the objective's name.

    Returns:
        The table with the decided design, ``source`` (``measured``, ``surrogate``, or
        ``failed`` where every candidate of the point failed there),
        ``predicted_<objective>`` (the ensemble's prediction of the decided configuration,
        never one of a configuration replaced), ``measured_<objective>`` (its measured mean,
        NaN where unmeasured) and ``uncertainty`` (of the decided configuration's estimate,
        in the model space).
    """
    grid = optima.reset_index(drop=True)
    table = _candidates(grid, score.evidence, space)
    mean, uncertainty, _, ruled_out = score.estimate(table[space.names])
    table = table.assign(_pessimistic=mean + score.kappa * uncertainty, _uncertainty=uncertainty)
    table["_out"] = ruled_out
    order = ["_point", "_out", "_pessimistic"]  # a ruled-out configuration only when alone
    best = table.sort_values(order, kind="stable").drop_duplicates("_point")
    best = best.set_index("_point").reindex(np.arange(len(grid)))
    out = grid.copy()
    for name in space.design_names:
        out[name] = best[name].to_numpy()
        out[name] = out[name].astype(space.parameters[name].dtype)
    chosen = out[space.names]
    found = score.evidence.match(chosen)
    measured = found["_n"].to_numpy() > 0
    out[f"predicted_{objective}"] = score.predicted(chosen)
    out[f"measured_{objective}"] = np.where(
        measured, score.evidence.to_objective(found["_f"].to_numpy()), np.nan
    )
    out["uncertainty"] = best["_uncertainty"].to_numpy()
    failed = found["_failed"].to_numpy()
    out["source"] = np.where(measured, "measured", np.where(failed, "failed", "surrogate"))
    return out


def _candidates(grid: pd.DataFrame, evidence: Evidence, space: Space) -> pd.DataFrame:
    """Every grid point's candidates (``_point``: its row in ``grid``): the grid optimizer's
    choice, the configurations measured there, the other points' incumbents valid there."""
    inputs = space.input_names
    point = np.arange(len(grid))
    candidates = [grid[space.names].assign(_point=point)]
    measured = evidence.table
    if len(measured):
        here = measured[space.names].merge(grid[inputs].assign(_point=point), on=inputs)
        candidates.append(here)
    incumbents = evidence.incumbents()
    if len(incumbents):
        owner = np.repeat(point, len(incumbents))
        design = incumbents[space.design_names].iloc[np.tile(np.arange(len(incumbents)), len(grid))]
        block = pd.concat(
            [grid[inputs].iloc[owner].reset_index(drop=True), design.reset_index(drop=True)],
            axis=1,
        ).assign(_point=owner)
        candidates.append(block[space.is_valid(block[space.names])])
    table = pd.concat(candidates, ignore_index=True).drop_duplicates([*space.names, "_point"])
    return table.reset_index(drop=True)


def evidence_columns(objective: str) -> Sequence[str]:
    """Columns :func:`decide` adds or rewrites."""
    return (f"predicted_{objective}", f"measured_{objective}", "uncertainty", "source")
