"""Decisions from evidence: the configuration each grid point ships, and what it is worth.

A grid point's candidates are the grid optimizer's choice (the surrogate's predicted optimum),
every valid configuration of the point where the space enumerates them and they are a few
dozen (a table replay's listed ones: the ensemble then decides among all of them, decision
0026),
every configuration measured at the point's exact inputs, and the incumbents (best measured
configurations) of the input points measured repeatedly (a categorical GPU input...), valid
there. Each candidate gets an estimate in the objective's model space (``log`` of a positive
objective): where it was measured, the measurement (its mean, and its standard error from the
raw repeat times, at least ``NOISE_FLOOR``); elsewhere the mean and spread of a
:class:`~mlkaps_gpu.surrogate.BootstrapEnsemble`. The decision is taken in two stages
(decision 0054). The *pessimistic* estimate ``mean + kappa * uncertainty`` first says which
candidates may ship: among measured configurations the best one, unless it is noisier than a
slightly slower one; an unmeasured configuration (a guess) replaces it only when the model is
confident it is better, which guards against the optimizer's curse (the argmin of a model over
thousands of configurations is where the model errs low). The guesses so admitted (every guess
where nothing was measured at the point) are then ranked by their mean: the members' spread
says whether a guess may replace a measurement, not which of two guesses is faster. A
configuration that failed at a point's inputs (a run-time error, a timeout) and never succeeded
there, or that never ran there and either failed wherever it ran with the point's categorical
inputs (decision 0044) or is found more likely than not to fail there by a classifier of the
campaign's failed rows (decision 0041), is never its decision while the point has another
candidate, and scores worse than anything measured (``Evidence.penalty``), so that no tree leaf
ships it there either.

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
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.space import Space
from mlkaps_gpu.surrogate import BootstrapEnsemble, FailureClassifier

#: Weight of the uncertainty in the pessimistic estimate ``mean + kappa * uncertainty``
#: (0.5 since decision 0024: with the centre members' estimate of decision 0023, 1.0 kept
#: measured configurations that the estimate knew to be slower).
DECIDE_KAPPA = 0.5
#: Smallest relative standard error assumed for a measurement (timer resolution, drift).
NOISE_FLOOR = 0.005
#: Most incumbents of other input points carried to a grid point as candidates.
GLOBAL_CANDIDATES = 16
#: Nearest measured input points whose best measured configuration is a candidate at a grid
#: point (inputs that take many values: a neighbour's optimum is evidence of one here).
NEIGHBOUR_CANDIDATES = 4
#: Distinct configurations measured at an input point from which its best measured one speaks
#: for the best there (see :meth:`EvidenceScore.only_measured_at`): with one or two measured
#: configurations, the best of them says little about the best of the point, unless one of
#: them was the decisions' own answer there (on a kernel measured live: decision 0053).
STRICT_MIN_MEASURED = 5
#: Most (grid point, valid design) rows for which every valid design of every grid point is a
#: candidate (a table replay's listed designs, an enumerable space's valid set): the ensemble
#: then decides among all of them, not only among the grid optimizer's choice (another model's
#: argmin) and the measured ones. Above it, the optimizer's choice speaks for the model.
ENUMERATED_CANDIDATES = 250_000
#: Most valid designs of one grid point for which they are all candidates: the ensemble's
#: argmin over thousands of designs is where it errs low (the optimizer's curse; on the syr2k
#: replay it shipped a configuration 1.4x slower than the optimizer's choice), over a few dozen
#: (a table's listed choices, a kernel's tile sizes) it is not (decision 0026).
ENUMERATED_PER_POINT = 64
#: Distance (inputs scaled to [0, 1], log-scaled where the parameter is) within which a
#: configuration's measured residual corrects the model's estimate of it elsewhere
#: (:meth:`EvidenceScore._local_residual`): a tenth of an input's range.
LOCAL_BANDWIDTH = 0.1


def numeric_inputs(space: Space) -> list[str]:
    """The space's inputs that take numeric values (``int`` or ``float``), in order."""
    return [n for n in space.input_names if space.parameters[n].kind in ("int", "float")]


def _categorical_inputs(space: Space) -> list[str]:
    """The space's inputs that are not numeric, in order."""
    numeric = set(numeric_inputs(space))
    return [n for n in space.input_names if n not in numeric]


def _never_in(rows: pd.DataFrame, other: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The distinct ``columns`` values of ``rows`` that no row of ``other`` holds."""
    distinct, known = rows[columns].drop_duplicates(), other[columns].drop_duplicates()
    merged = distinct.merge(known, on=columns, how="left", indicator=True)
    return merged.loc[merged["_merge"] == "left_only", columns].reset_index(drop=True)


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
        failed_wherever_run: the designs, with values of the categorical inputs, that failed at
            every input point they ran at with those values (never a success there).
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
        self.failed_table = _never_in(samples.loc[~good], self.table, space.names)
        # configurations that failed at every input point they ran at, per value of the
        # categorical inputs: likely to fail where they never ran (decision 0044)
        self._group = [*space.design_names, *_categorical_inputs(space)]
        self.failed_wherever_run = _never_in(self.failed_table, self.table, self._group)
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

    def fails_wherever_run(self, table: pd.DataFrame) -> np.ndarray:
        """Per row: whether its configuration ran at least once with the row's values of the
        categorical inputs and failed at every input point it ran at with them
        (:attr:`failed_wherever_run`)."""
        if self.failed_wherever_run.empty or table.empty:
            return np.zeros(len(table), dtype=bool)
        keys = table[self._group].reset_index(drop=True)
        merged = keys.merge(self.failed_wherever_run.assign(_hit=True), on=self._group, how="left")
        return merged["_hit"].fillna(False).to_numpy(dtype=bool)

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
            there must beat the measured ones by the model's calibrated error (see
            :meth:`only_measured_at`).
        model_error: the model's error on rows it did not learn from (out-of-bag root mean
            square residual, model space; :func:`out_of_bag_error`), added in quadrature to the
            members' spread at ``strict`` points.
        failures: a classifier of the campaign's failed rows (on ``feature_space``'s
            features): a configuration never run at a point that it finds more likely than not
            to fail there is ruled out like one that failed there (decision 0041).
    """

    def __init__(
        self,
        evidence: Evidence,
        model: BootstrapEnsemble,
        feature_space: Space,
        *,
        kappa: float = DECIDE_KAPPA,
        strict: pd.DataFrame | None = None,
        model_error: float = 0.0,
        failures: FailureClassifier | None = None,
    ) -> None:
        self.evidence = evidence
        self.failures = failures
        self.model = model
        self.feature_space = feature_space
        self.kappa = kappa
        self.strict = strict
        self.model_error = float(model_error) if np.isfinite(model_error) else 0.0
        self._last: tuple[bytes, tuple[np.ndarray, ...]] | None = None
        self._slowest: pd.DataFrame | None = None  # per input point: _slowest_listed
        self._best: pd.DataFrame | None = None  # per input point: _best_measured
        # every row estimated so far (its space columns) and its (mean, sd, seen, out)
        self._rows: dict[int, int] = {}
        self._values: tuple[np.ndarray, ...] = ()

    def only_measured_at(
        self, points: pd.DataFrame, answered: pd.DataFrame | None = None
    ) -> EvidenceScore:
        """The same estimates, except that at those of ``points`` (input rows) where at least
        :data:`STRICT_MIN_MEASURED` configurations were measured, or where one of the
        decisions' answers was measured (``answered``: input rows), a configuration never
        measured there is judged with the model's calibrated uncertainty (the members' spread
        and :attr:`model_error` in quadrature) instead of the spread alone: it replaces the
        measured ones only where the model is confident beyond its own error on unseen rows.
        The confirmation asks this where the budget ended before the trees' answer was
        measured. A measurement of one configuration at a point is evidence about that
        configuration, not about the best one there: with one slow configuration measured at a
        size, a configuration the model predicts 100 times faster still ships. An answer the
        decisions chose there and the confirmation measured is (decision 0053): a guess a few
        percent ahead of it, within the model's error, does not replace it."""
        inputs = self.evidence.space.input_names
        counts = self.evidence.table.groupby(inputs, sort=False, dropna=False).size()
        measured = counts[counts >= STRICT_MIN_MEASURED].reset_index()[inputs]
        if answered is not None and len(answered):
            measured = pd.concat([measured, answered[inputs]], ignore_index=True)
            measured = measured.drop_duplicates()
        strict = points[inputs].drop_duplicates().merge(measured, on=inputs)
        return EvidenceScore(
            self.evidence,
            self.model,
            self.feature_space,
            kappa=self.kappa,
            strict=strict,
            model_error=self.model_error,
            failures=self.failures,
        )

    def at_strict_points(self, table: pd.DataFrame) -> np.ndarray:
        """Per row of ``table``: whether its input point is one of :meth:`only_measured_at`'s
        (all False without them)."""
        if self.strict is None or not len(self.strict):
            return np.zeros(len(table), dtype=bool)
        inputs = self.evidence.space.input_names
        rows = table[inputs].reset_index(drop=True)
        flag = rows.merge(self.strict.assign(_strict=True), on=inputs, how="left")["_strict"]
        return flag.fillna(False).to_numpy(dtype=bool)

    def estimate(
        self, table: pd.DataFrame
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Signed model-space estimate, its uncertainty, whether each row was measured and
        whether it is ruled out: the measurement and its standard error where there is one,
        ``Evidence.penalty`` (no uncertainty; ruled out) where the configuration only ever
        failed there or, never run there, is likely to fail (:meth:`ruled_out`), else the
        ensemble's mean and spread (with :attr:`model_error` added in quadrature at ``strict``
        points). A configuration a table replay does not list at a recorded point (invalid
        there: the decisions never take it) is no better than the slowest listed there that is
        not ruled out, with no uncertainty (decision 0045: so the trees weigh an answer the
        data would score as that point's slowest). (Not a precision-weighted blend: the
        members' spread is no calibrated error of the model at one configuration, and a blend
        let a smooth model pull a measured 5 % better configuration back to its neighbours'
        level.) Each row is estimated once: the decisions, the portfolio and the trees' score
        ask for the same (point, configuration) rows again in other tables (on a table of
        thousands of shapes, every listed configuration of every shape), and the last table's
        answer is kept whole."""
        rows = table.reset_index(drop=True)
        key = repr(list(rows.columns)).encode() + (
            pd.util.hash_pandas_object(rows, index=False).to_numpy().tobytes()
        )
        if self._last is None or self._last[0] != key:
            self._last = (key, self._estimate_rows(rows))
        mean, sd, seen, out = self._last[1]
        return mean.copy(), sd.copy(), seen.copy(), out.copy()

    def _estimate_rows(
        self, table: pd.DataFrame
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`estimate` of ``table``'s rows: each row's own estimate (:meth:`_own_rows`),
        and an unlisted one no better than the slowest listed at its point (decision 0045)."""
        mean, sd, seen, out, unlisted = self._own_rows(table)
        if unlisted.any():
            slowest = self._slowest_listed(table[unlisted])
            pessimistic = mean[unlisted] + self.kappa * sd[unlisted]
            mean[unlisted] = np.maximum(pessimistic, slowest)
            sd[unlisted] = 0.0
        return mean, sd, seen, out

    def _own_rows(self, table: pd.DataFrame) -> tuple[np.ndarray, ...]:
        """:meth:`_own` of ``table``'s rows, each computed once: it depends on the row's own
        values alone, and the decisions, decision 0045's slowest listed, the portfolio and the
        trees' score ask for the same (point, configuration) rows again in other tables (on a
        table of thousands of shapes, every listed configuration of every shape), so a row
        estimated before (the same 64-bit hash of its space columns' values) is looked up."""
        rows = table[self.evidence.space.names].reset_index(drop=True)
        hashed = pd.util.hash_pandas_object(rows, index=False).to_numpy(dtype=np.uint64)
        hashes = hashed.tolist()
        where = np.fromiter((self._rows.get(h, -1) for h in hashes), np.int64, len(hashes))
        new = where < 0
        if new.any():
            first = ~pd.Series(hashed[new]).duplicated().to_numpy()
            fresh = rows[new][first].reset_index(drop=True)
            part = self._own(fresh)
            start = len(self._values[0]) if self._values else 0
            self._rows.update({h: start + n for n, h in enumerate(hashed[new][first].tolist())})
            self._values = (
                tuple(np.concatenate(pair) for pair in zip(self._values, part, strict=True))
                if self._values
                else part
            )
            where = np.fromiter((self._rows[h] for h in hashes), np.int64, len(hashes))
        return tuple(values[where] for values in self._values)

    def _own(self, table: pd.DataFrame) -> tuple[np.ndarray, ...]:
        """Per row of ``table``, its own estimate (:meth:`estimate` but for decision 0045),
        whether it was measured, whether it is ruled out, and whether it is unlisted."""
        sign = self.evidence.sign
        mean, sd = self.model.predict_log(self.feature_space.features(table))
        mean = sign * mean
        sd = np.maximum(sd, 1e-12)
        found = self.evidence.match(table)
        seen = found["_n"].to_numpy() > 0
        out = self._ruled_out(table, found)
        if self.strict is not None and len(self.strict):
            guarded = self.at_strict_points(table) & ~seen
            sd = np.where(guarded, np.hypot(sd, self.model_error), sd)
        mean = mean + self._local_residual(table, ~seen & ~out)
        mean = np.where(out, self.evidence.penalty, mean)
        sd = np.where(out, 0.0, sd)
        return (
            np.where(seen, found["_f"], mean),
            np.where(seen, found["_se"], sd),
            seen,
            out,
            self._unlisted(table),
        )

    def _unlisted(self, table: pd.DataFrame) -> np.ndarray:
        """Per row of ``table``: whether a table replay does not list its configuration at its
        recorded input point (all False without listed rows, and off the recorded points)."""
        space = self.evidence.space
        listed = space.listed_rows
        if listed is None or not len(table):
            return np.zeros(len(table), dtype=bool)
        columns = {name: table[name].to_numpy() for name in listed.names}
        recorded = listed.point_ids(columns, len(table)) >= 0
        return recorded & ~space.is_valid(table)

    def _slowest_listed(self, table: pd.DataFrame) -> np.ndarray:
        """Per row of ``table``: the largest pessimistic estimate among the configurations
        listed at its input point and not ruled out there (``Evidence.penalty`` where none is),
        computed once per input point."""
        space = self.evidence.space
        inputs = space.input_names
        points = table[inputs].reset_index(drop=True)
        cache = self._slowest
        if cache is None:
            cache = points.iloc[:0].assign(_slowest=np.zeros(0))
        known = points.merge(cache, on=inputs, how="left")["_slowest"].to_numpy(dtype=float)
        missing = points[np.isnan(known)].drop_duplicates().reset_index(drop=True)
        if len(missing):
            slowest = np.full(len(missing), self.evidence.penalty, dtype=np.float64)
            found = space.listed_design_codes(missing)
            if found is not None and len(found[0]):
                owners, codes = found
                rows = space.assemble(missing.iloc[owners], codes)
                mean, sd, _, out, _ = self._own_rows(rows)  # listed: their own estimates
                usable = ~out  # the slowest that runs: a failed one scores the penalty
                worst = pd.Series((mean + self.kappa * sd)[usable]).groupby(owners[usable]).max()
                slowest[worst.index.to_numpy()] = worst.to_numpy()
            self._slowest = cache = pd.concat(
                [cache, missing.assign(_slowest=slowest)], ignore_index=True
            )
            known = points.merge(cache, on=inputs, how="left")["_slowest"].to_numpy(dtype=float)
        return known

    def ruled_out(self, table: pd.DataFrame) -> np.ndarray:
        """Per row of ``table``: whether the configuration is ruled out at those inputs: it
        failed every time it ran there, or it never ran there and either failed at every point
        it ran at with the same categorical inputs (decision 0044) or the failure classifier
        finds it more likely than not to fail (a resource limit the campaign met at other
        points: an objective model of successful runs alone predicts such a configuration as
        fast as its neighbours)."""
        return self._ruled_out(table, self.evidence.match(table))

    def _ruled_out(self, table: pd.DataFrame, found: pd.DataFrame) -> np.ndarray:
        out = found["_failed"].to_numpy(dtype=bool).copy()
        unseen = (found["_n"].to_numpy() == 0) & ~out
        if not unseen.any():
            return out
        rows = table.reset_index(drop=True).loc[unseen]
        out[unseen] = self.evidence.fails_wherever_run(rows)
        if self.failures is not None:
            features = self.feature_space.features(rows[self.feature_space.names])
            out[unseen] |= self.failures.likely(features)
        return out

    def _local_residual(self, table: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
        """Per row of ``table`` (0 where ``rows`` is False): the model's residual (measured
        minus predicted, signed model space) of the same configuration at the nearest input
        point where it was measured, weighted ``1 - d / LOCAL_BANDWIDTH`` by the distance in
        the inputs' scaled coordinates (0 beyond). A configuration measured 2x slower than
        predicted at a nearby size is not predicted fast here: the model's bias is local to a
        configuration, and measurements anchor it. Nothing on inputs without a numeric
        parameter (categorical inputs: each value has its own measurements)."""
        correction = np.zeros(len(table))
        space = self.evidence.space
        numeric = numeric_inputs(space)
        measured = self.evidence.table
        if not numeric or measured.empty or not rows.any():
            return correction
        residuals = self._residuals()
        design = space.design_names
        query = table[design].reset_index(drop=True).assign(_row=np.arange(len(table)))[rows]
        keys = measured[design].drop_duplicates().reset_index(drop=True)
        keys["_design"] = np.arange(len(keys))
        query = query.merge(keys, on=design, how="inner")
        owner = measured[design].merge(keys, on=design, how="left")["_design"].to_numpy()
        if query.empty:
            return correction
        from scipy.spatial import cKDTree

        points = _coordinates(measured, space)
        targets = _coordinates(table.reset_index(drop=True).iloc[query["_row"].to_numpy()], space)
        for key, group in (
            pd.DataFrame({"_design": query["_design"].to_numpy()})
            .groupby("_design")
            .indices.items()
        ):
            mine = np.flatnonzero(owner == key)
            distance, nearest = cKDTree(points[mine]).query(targets[group], k=1)
            weight = np.clip(1.0 - np.asarray(distance) / LOCAL_BANDWIDTH, 0.0, 1.0)
            rows_here = query["_row"].to_numpy()[group]
            correction[rows_here] = weight * residuals[mine[np.asarray(nearest)]]
        return correction

    def _residuals(self) -> np.ndarray:
        """Measured minus predicted (signed model space) per row of the evidence table,
        computed once."""
        if getattr(self, "_residuals_cache", None) is None:
            table = self.evidence.table
            predicted, _ = self.model.predict_log(self.feature_space.features(table))
            self._residuals_cache = table["_f"].to_numpy() - self.evidence.sign * predicted
        return self._residuals_cache

    def surprises(self, table: pd.DataFrame) -> np.ndarray:
        """Per row of ``table``: its measured minus predicted value (signed model space:
        negative where it measured better than the model predicts) over twice the median
        absolute residual of every measured configuration; NaN where it was not measured."""
        residuals = self._residuals()
        scale = 2.0 * float(np.median(np.abs(residuals))) if len(residuals) else 0.0
        names = self.evidence.space.names
        keyed = self.evidence.table[names].assign(_r=residuals / max(scale, 1e-12))
        rows = table[names].reset_index(drop=True).assign(_row=np.arange(len(table)))
        merged = rows.merge(keyed, on=names, how="left").sort_values("_row")
        return merged["_r"].to_numpy(dtype=np.float64)

    def pessimistic(self, table: pd.DataFrame) -> np.ndarray:
        """Signed ``mean + kappa * uncertainty`` per row, except for an admitted guess: a
        configuration never measured at its point whose pessimistic estimate beats the best
        measured one there (every guess where nothing was measured) scores its mean (two
        stages: the spread says whether a guess may replace the measurements, the mean which
        admitted guess is faster)."""
        return self._two_stage(table, *self.estimate(table))

    def _two_stage(
        self,
        table: pd.DataFrame,
        mean: np.ndarray,
        uncertainty: np.ndarray,
        seen: np.ndarray,
        out: np.ndarray,
    ) -> np.ndarray:
        """:meth:`pessimistic` from ``table``'s estimates (:meth:`estimate`), for a caller
        that has them already."""
        value = mean + self.kappa * uncertainty
        admitted = ~seen & ~out & (value < self._best_measured(table))
        return np.where(admitted, mean, value)

    def _best_measured(self, table: pd.DataFrame) -> np.ndarray:
        """Per row of ``table``: the lowest pessimistic estimate of a configuration measured
        at its input point (inf where none was); the per-point minimum computed once."""
        inputs = self.evidence.space.input_names
        measured = self.evidence.table
        if measured.empty:
            return np.full(len(table), np.inf)
        if self._best is None:
            self._best = (
                measured.assign(_p=measured["_f"] + self.kappa * measured["_se"])
                .groupby(inputs, sort=False, dropna=False)["_p"]
                .min()
                .reset_index()
            )
        rows = table[inputs].reset_index(drop=True)
        found = rows.merge(self._best, on=inputs, how="left")["_p"].to_numpy(dtype=np.float64)
        return np.where(np.isnan(found), np.inf, found)

    def score(self, table: pd.DataFrame) -> np.ndarray:
        """:meth:`pessimistic` (an admitted guess at its mean) as a minimised objective value
        (the trees' score)."""
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
        NaN where unmeasured), ``uncertainty`` (of the decided configuration's estimate,
        in the model space) and ``best_known_<objective>`` (the best estimate among the
        point's candidates: a measurement where there is one, else the ensemble's mean; the
        reference of the header's regret where the truth is unknown).
    """
    grid = optima.reset_index(drop=True)
    table = _candidates(grid, score.evidence, space)
    mean, uncertainty, seen, ruled_out = score.estimate(table[space.names])
    two_stage = score._two_stage(table, mean, uncertainty, seen, ruled_out)
    table = table.assign(_pessimistic=two_stage, _uncertainty=uncertainty, _mean=mean)
    table["_out"] = ruled_out
    usable = table[~table["_out"]]
    best_known = usable.groupby("_point")["_mean"].min().reindex(np.arange(len(grid)))
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
    out[f"best_known_{objective}"] = score.evidence.to_objective(best_known.to_numpy())
    return out


def choice_losses(answers: pd.DataFrame, score: EvidenceScore, space: Space) -> np.ndarray:
    """Per answer (a row of inputs and design), the expected loss of shipping it rather than
    the best other candidate of its point (decision 0047), in the model space: with ``d`` the
    rival's pessimistic estimate less the answer's and ``s`` the root sum of squares of their
    uncertainties, ``E[max(0, answer - rival)] = s (phi(d / s) - (d / s) Phi(-d / s))`` for
    normal errors (``max(0, -d)`` where ``s`` is 0; 0 where the point has no other candidate
    that is not ruled out). The candidates are those :func:`decide` weighs
    (:func:`_candidates`), the rival the best of them by ``mean + kappa * uncertainty``. The
    loss is large where a rival is within the spread of the answer and the spread is wide: a
    measurement there is the likeliest to change what ships, and by the most."""
    from scipy.stats import norm

    grid = answers[space.names].reset_index(drop=True)
    loss = np.zeros(len(grid))
    if grid.empty:
        return loss
    table = _candidates(grid, score.evidence, space)
    mean, uncertainty, _, ruled_out = score.estimate(table[space.names])
    answer_mean, answer_uncertainty, _, _ = score.estimate(grid)
    point = table["_point"].to_numpy()
    own = (space.design_codes(table) == space.design_codes(grid)[point]).all(axis=1)
    other = ~own & ~ruled_out
    if not other.any():
        return loss
    rivals = pd.DataFrame(
        {
            "_point": point[other],
            "_pessimistic": (mean + score.kappa * uncertainty)[other],
            "_uncertainty": uncertainty[other],
        }
    )
    best = rivals.sort_values(["_point", "_pessimistic"], kind="stable")
    best = best.drop_duplicates("_point").set_index("_point")
    at = best.index.to_numpy()
    gap = best["_pessimistic"].to_numpy() - (answer_mean[at] + score.kappa * answer_uncertainty[at])
    scale = np.hypot(answer_uncertainty[at], best["_uncertainty"].to_numpy())
    spread = scale > 0
    z = np.divide(gap, scale, out=np.zeros_like(gap), where=spread)
    expected = scale * (norm.pdf(z) - z * norm.sf(z))
    loss[at] = np.where(spread, expected, np.maximum(-gap, 0.0))
    return loss


def _candidates(grid: pd.DataFrame, evidence: Evidence, space: Space) -> pd.DataFrame:
    """Every grid point's candidates (``_point``: its row in ``grid``): the grid optimizer's
    choice, every valid design of the point where they are few enough to enumerate
    (:func:`_every_valid`), the configurations measured there, the other points' incumbents
    valid there and the best measured configurations of its nearest measured input points
    valid there."""
    inputs = space.input_names
    point = np.arange(len(grid))
    # every valid design first: where they are enumerated, the table does not depend on the
    # grid's own design (deciding decided optima again reads the same table)
    every = _every_valid(grid, space)
    candidates = [] if every is None else [every]
    candidates.append(grid[space.names].assign(_point=point))
    measured = evidence.table
    if len(measured):
        here = measured[space.names].merge(grid[inputs].assign(_point=point), on=inputs)
        candidates.append(here)
    for owner, design in (
        _carried(grid, evidence.incumbents(), space.design_names),
        _neighbours(grid, evidence),
    ):
        if len(owner):
            block = pd.concat(
                [grid[inputs].iloc[owner].reset_index(drop=True), design.reset_index(drop=True)],
                axis=1,
            ).assign(_point=owner)
            candidates.append(block[space.is_valid(block[space.names])])
    table = pd.concat(candidates, ignore_index=True).drop_duplicates([*space.names, "_point"])
    return table.reset_index(drop=True)


def _every_valid(grid: pd.DataFrame, space: Space) -> pd.DataFrame | None:
    """Every valid design of every grid point (``_point``: its row in ``grid``), or None where
    the space does not enumerate them, a point has more than :data:`ENUMERATED_PER_POINT` or
    they exceed :data:`ENUMERATED_CANDIDATES` rows in all."""
    inputs = grid[space.input_names].reset_index(drop=True)
    listed = space.listed_design_codes(inputs)
    if listed is not None:
        owners, codes = listed
    else:
        if not space.enumerable:
            return None
        if space.constrained_inputs:
            counts = grid["n_valid"].to_numpy() if "n_valid" in grid else None
            if counts is not None and (
                counts.sum() > ENUMERATED_CANDIDATES or counts.max() > ENUMERATED_PER_POINT
            ):
                return None
            blocks = [space.valid_design_codes(row) for row in inputs.to_dict("records")]
        else:
            valid = space.valid_design_codes({})
            if len(valid) > ENUMERATED_PER_POINT:
                return None
            blocks = [valid] * len(inputs)
        owners = np.repeat(np.arange(len(inputs)), [len(b) for b in blocks])
        codes = np.vstack(blocks) if blocks else np.zeros((0, len(space.design)), np.int64)
    if not len(owners) or len(owners) > ENUMERATED_CANDIDATES:
        return None
    if np.bincount(owners).max() > ENUMERATED_PER_POINT:
        return None
    table = space.assemble(inputs.iloc[owners], codes)
    return table[space.names].assign(_point=owners)


def _carried(
    grid: pd.DataFrame, incumbents: pd.DataFrame, design_names: Sequence[str]
) -> tuple[np.ndarray, pd.DataFrame]:
    """Every incumbent at every grid point: (grid rows, design rows)."""
    if not len(incumbents):
        return np.empty(0, dtype=np.int64), incumbents
    owner = np.repeat(np.arange(len(grid)), len(incumbents))
    design = incumbents.iloc[np.tile(np.arange(len(incumbents)), len(grid))]
    return owner, design[list(design_names)]


def _neighbours(grid: pd.DataFrame, evidence: Evidence) -> tuple[np.ndarray, pd.DataFrame]:
    """For every grid point, the best measured design of each of its
    :data:`NEIGHBOUR_CANDIDATES` nearest measured input points (the point itself included):
    (grid rows, design rows). Distances in the inputs' scaled coordinates (log where the
    parameter is log-scaled); a categorical input must match. Nothing when every input is
    categorical (the incumbents already carry other values' optima)."""
    space = evidence.space
    inputs = space.input_names
    design_names = space.design_names
    empty = np.empty(0, dtype=np.int64), evidence.table[design_names].iloc[:0]
    numeric = numeric_inputs(space)
    if not numeric or evidence.table.empty:
        return empty
    best = evidence.table.sort_values("_f", kind="stable").drop_duplicates(inputs)
    best = best.reset_index(drop=True)
    k = min(NEIGHBOUR_CANDIDATES, len(best))
    grid_x, best_x = _coordinates(grid, space), _coordinates(best, space)
    from scipy.spatial import cKDTree

    _, nearest = cKDTree(best_x).query(grid_x, k=k)
    nearest = np.asarray(nearest).reshape(len(grid), k)
    owner = np.repeat(np.arange(len(grid)), k)
    return owner, best[design_names].iloc[nearest.reshape(-1)]


def _coordinates(table: pd.DataFrame, space: Space) -> np.ndarray:
    """Input rows as points: numeric inputs scaled to [0, 1] over their range (log-scaled
    where the parameter is), categorical inputs as a code times a distance no numeric
    difference reaches."""
    columns = []
    for name in space.input_names:
        parameter = space.parameters[name]
        values = parameter.numeric(table[name].to_numpy())
        if parameter.kind in ("int", "float"):
            domain = parameter.values if parameter.values is not None else ()
            low = float(min(domain)) if domain else float(parameter.low or 0.0)
            high = float(max(domain)) if domain else float(parameter.high or 0.0)
            if parameter.log and low > 0:
                values, low, high = np.log(values), np.log(low), np.log(high)
            columns.append((values - low) / max(high - low, 1e-12))
        else:
            columns.append(values * 1e3)
    return np.column_stack(columns).astype(np.float64)


def out_of_bag_error(model: BootstrapEnsemble, features: np.ndarray, target: np.ndarray) -> float:
    """Root mean square of the ensemble's out-of-bag residuals, in its model space (the log
    of ``target`` with ``log_target``): its error on rows a member did not learn from. NaN
    when fewer than 5 rows have an out-of-bag prediction."""
    values = np.asarray(target, dtype=np.float64)
    values = np.log(values) if model.log_target else values
    residual = values - model.out_of_bag(features)
    residual = residual[np.isfinite(residual)]
    if len(residual) < 5:
        return float("nan")
    return float(np.sqrt(np.mean(residual**2)))


def evidence_columns(objective: str) -> Sequence[str]:
    """Columns :func:`decide` adds or rewrites."""
    return (
        f"predicted_{objective}",
        f"measured_{objective}",
        "uncertainty",
        "source",
        f"best_known_{objective}",
    )


def regret_against_best_known(
    score: EvidenceScore,
    answers: pd.DataFrame,
    decisions: pd.DataFrame,
    best_measured: np.ndarray,
    objective: str,
) -> np.ndarray:
    """Per grid point, the header's relative regret against the best configuration known
    there: its answer's estimate (the measurement, else the ensemble's mean) against the
    better of the point's best measured value (signed, model space: ``best_measured``) and the
    best estimate among the decision's candidates (``best_known_<objective>`` of
    ``decisions``). Never 0 by construction: a point where one slow configuration was measured
    is compared with what the model knows to be faster."""
    evidence = score.evidence
    mean, _, _, _ = score.estimate(answers)
    best = np.asarray(best_measured, dtype=np.float64)
    column = f"best_known_{objective}"
    if column in decisions:
        known = decisions[column].to_numpy(dtype=np.float64)
        signed = evidence.sign * (np.log(known) if evidence.log_space else known)
        best = np.fmin(best, signed)
    header = evidence.to_objective(mean)
    reference = evidence.to_objective(best)
    regret = evidence.sign * (header - reference) / np.abs(reference)
    return np.where(np.isfinite(regret), np.maximum(regret, 0.0), np.nan)


def regret_summary(regret: pd.Series) -> dict[str, Any]:
    """What verification.json says of the header's regret against the best known
    configuration per grid point (measured or modelled)."""
    values = regret.to_numpy(dtype=np.float64)
    values = values[np.isfinite(values)]
    if not len(values):
        return {"points": 0}
    return {
        "points": len(values),
        "geomean_fraction": float(np.exp(-np.mean(np.log1p(values)))),
        "max": float(values.max()),
        "above_1_percent": int(np.count_nonzero(values > 0.01)),
        "slower_than_1_5x": int(np.count_nonzero(values > 0.5)),
    }
