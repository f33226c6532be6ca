"""The confirmation stage: measure the trees' answers before the header ships.

Within the share of the budget the sampling stage left (``[sampling] confirm``), it measures the
answers at the grid points where they were never measured (where it cannot measure them all,
those whose choice is least certain, by the expected loss against their point's best rival:
decision 0047), re-decides and refits the trees; when every answer is measured, a kernel
measured live has the answers that rest on one measurement and measured surprisingly well
(better than the model predicts, by more than twice the median residual) measured again, the
most surprising first, one batch a round (the best of several noisy measurements is the
likeliest to be a lucky one); what is left goes to the answers' most promising unmeasured
neighbours. Where the budget (or the rounds) ends before an answer was measured and its point
has five configurations measured, or (a kernel measured live) an earlier answer measured there,
a configuration measured there ships instead unless the model is confident beyond its own
error that the answer is faster (decision 0053).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu._numbers import plain
from mlkaps_gpu.campaign._decisions import (
    EvidenceScore,
    choice_losses,
    regret_against_best_known,
    regret_summary,
)
from mlkaps_gpu.campaign._directory import atomic_csv
from mlkaps_gpu.campaign._stage_context import StageContext
from mlkaps_gpu.campaign._stage_decisions import DecisionStage
from mlkaps_gpu.sampling import Exploiter, SamplingSettings
from mlkaps_gpu.trees import FittedSelector, Selector

#: Most rounds of confirmation (measure the answers, re-decide, refit the trees).
CONFIRM_ROUNDS = 8
#: Grid points up to which verification.json lists every point's measured regret.
LISTED_POINTS = 64


class ConfirmationStage:
    """Measure the trees' answers, re-decide and refit, within the budget.

    Args:
        context: the campaign's parts (the store and executor it measures with).
        decisions: the decisions stage it re-decides and refits with.
        budget: the campaign's whole budget: the store's rows when the stage may stop.
        batch_size: most neighbours measured per round.
        ship_measured: where an answer stays unmeasured, ship a configuration measured at its
            point (with a confirmation reserve; off when the campaign keeps none).
        remeasure: measure again the answers measured once and surprisingly well (a kernel
            measured live; a replay gives the same value every time). It stops for good when a
            round of them measures exactly what it measured before (a deterministic kernel).
    """

    def __init__(
        self,
        context: StageContext,
        decisions: DecisionStage,
        *,
        budget: int,
        batch_size: int,
        ship_measured: bool = True,
        remeasure: bool = False,
        edges: pd.DataFrame | None = None,
    ) -> None:
        self.edges = edges
        self.context = context
        self.decisions = decisions
        self.budget = int(budget)
        self.batch_size = int(batch_size)
        self.ship_measured = ship_measured
        self.remeasure = remeasure

    @classmethod
    def from_settings(
        cls,
        settings: SamplingSettings,
        context: StageContext,
        decisions: DecisionStage,
        *,
        confirm_share: float,
        remeasure: bool = False,
        edges: pd.DataFrame | None = None,
    ) -> ConfirmationStage:
        """The stage of ``[sampling]`` (budget, batch size), with the campaign's confirmation
        share (0 where it keeps no reserve) and whether answers are measured again (a kernel
        measured live)."""
        return cls(
            context,
            decisions,
            budget=settings.budget,
            batch_size=settings.batch_size,
            ship_measured=confirm_share > 0,
            remeasure=remeasure,
            edges=edges,
        )

    def run(self, optima: pd.DataFrame) -> tuple[pd.DataFrame, FittedSelector, dict[str, Any]]:
        """Decide, fit, and confirm by measuring; rewrites ``optima.csv`` with measured beside
        predicted values. Returns the decisions, the fitted trees and the details
        verification.json records."""
        context, decisions = self.context, self.decisions
        space, store = context.space, context.store
        decided = decisions.run(optima)
        optima, fitted, score = decided.optima, decided.fitted, decided.score
        assert score is not None  # decided from the evidence
        spent = {
            "edges": 0,
            "answers": 0,
            "remeasured": 0,
            "neighbours": 0,
            "unconfirmed": 0,
            "measured_instead": 0,
        }
        remeasure = self.remeasure
        rounds = 0
        answered = [optima[space.input_names].iloc[:0]]  # points where an answer was measured
        # each configuration where it becomes valid (taken from the sampling's budget): often
        # the fastest exactly there, and learnt only from beyond, where it is not
        edges = self.edges if self.edges is not None else space.empty_table()
        edges = edges[~score.evidence.tried(edges)].head(max(0, self.budget - len(store)))
        if len(edges):
            rows = edges[space.names].reset_index(drop=True)
            store.append(rows, *context.measure(rows))
            spent["edges"] = len(rows)
            decided = decisions.run(optima)
            optima, fitted, score = decided.optima, decided.fitted, decided.score
            assert score is not None
        while rounds < CONFIRM_ROUNDS and len(store) < self.budget:
            left = self.budget - len(store)
            answers = decisions.answers(fitted.selector, optima)
            tried = score.evidence.tried(answers)  # a failed answer is not run again
            # an answer unlisted (invalid) at its point is not measured: it can only fail
            unmeasured = answers[~tried & space.is_valid(answers)]
            unmeasured = unmeasured.drop_duplicates(space.names)
            if len(unmeasured):
                kind = "answers"
                if len(unmeasured) > left:
                    unmeasured = self._least_certain(unmeasured, score, left, rounds)
                rows = unmeasured
            else:
                once = self._surprising(answers, score) if remeasure else answers.iloc[:0]
                kind = "remeasured" if len(once) else "neighbours"
                rows = (
                    once.head(min(left, self.batch_size))
                    if len(once)
                    else self._polish_rows(optima, score, left)
                )
            if len(rows) == 0:
                break
            rows = rows[space.names].reset_index(drop=True)
            before = score.evidence.lookup(rows)
            store.append(rows, *context.measure(rows))
            spent[kind] += len(rows)
            if kind != "neighbours":
                answered.append(rows[space.input_names])
            rounds += 1
            decided = decisions.run(optima)
            optima, fitted, score = decided.optima, decided.fitted, decided.score
            assert score is not None
            if kind == "remeasured" and self._repeatable(rows, before, score):
                remeasure = False  # the kernel gives the same value every time
        # The budget (or the rounds) ended before some answers were measured: where the point
        # has measurements, ship a configuration measured there rather than an unconfirmed guess.
        unconfirmed = ~score.evidence.tried(decisions.answers(fitted.selector, optima))
        spent["unconfirmed"] = int(np.count_nonzero(unconfirmed))
        if self.ship_measured and unconfirmed.any():
            # a measured answer the re-decision left is kept on a kernel measured live, where
            # that re-decision rests on noisy readings (decision 0053); a replay's are exact
            strict = score.only_measured_at(
                optima.loc[unconfirmed, space.input_names],
                pd.concat(answered) if remeasure else None,
            )
            spent["measured_instead"] = 0 if strict.strict is None else len(strict.strict)
            if spent["measured_instead"]:
                score = strict
                optima = decisions.decide(optima, score)
                fitted = decisions.fit_on_evidence(optima, score)
        optima = self._with_header_columns(optima, fitted.selector, score)
        atomic_csv(optima, context.directory / "optima.csv")
        return optima, fitted, self._details(optima, spent, rounds)

    def _least_certain(
        self, answers: pd.DataFrame, score: EvidenceScore, n: int, rounds: int
    ) -> pd.DataFrame:
        """The ``n`` unmeasured answers whose choice is least certain: the largest expected
        loss against the best other candidate of their point (:func:`choice_losses`), then
        the largest spread of their estimate, ties in a seeded random order. The confirmation
        measures where a measurement is likeliest to change what ships, and by the most
        (decision 0047: before it, the widest estimates came first, though an answer far ahead
        of its rivals seldom changes)."""
        space = self.context.space
        _, uncertainty, _, _ = score.estimate(answers[space.names])
        loss = choice_losses(answers, score, space)
        rng = np.random.default_rng([self.context.seed, rounds, 17])
        tie_break = rng.permutation(len(answers))
        order = np.lexsort((tie_break, -np.round(uncertainty, 6), -np.round(loss, 8)))
        return answers.iloc[np.sort(order[:n])]

    def _surprising(self, answers: pd.DataFrame, score: EvidenceScore) -> pd.DataFrame:
        """The distinct answers measured (successfully) exactly once that measured better than
        the model predicts by more than twice the median residual, the most surprising first:
        a lucky reading (an outlier among noisy measurements) looks so."""
        distinct = answers.drop_duplicates(self.context.space.names).reset_index(drop=True)
        found = score.evidence.match(distinct)
        surprise = score.surprises(distinct)
        once = (found["_n"] == 1).to_numpy() & ~found["_failed"].to_numpy() & (surprise < -1.0)
        order = np.argsort(surprise[once], kind="stable")
        return distinct[once].iloc[order]

    @staticmethod
    def _repeatable(
        rows: pd.DataFrame,
        before: tuple[np.ndarray, np.ndarray, np.ndarray],
        score: EvidenceScore,
    ) -> bool:
        """Whether the rows measured again successfully gave exactly what they measured before
        (their mean over the measurements is unchanged): a deterministic kernel."""
        f_before, _, n_before = before
        f_after, _, n_after = score.evidence.lookup(rows)
        again = np.isfinite(f_before) & (n_after > n_before)
        return bool(again.any()) and bool(
            np.allclose(f_after[again], f_before[again], rtol=1e-12, atol=0.0)
        )

    def _polish_rows(self, optima: pd.DataFrame, score: EvidenceScore, n: int) -> pd.DataFrame:
        """Up to one batch (and ``n``) of unmeasured neighbours of the decisions, ranked by
        the ensemble's acquisition (see :class:`~mlkaps_gpu.sampling.Exploiter`)."""
        context = self.context
        store = context.store
        batch = min(n, self.batch_size)
        points = optima[context.space.input_names].drop_duplicates().reset_index(drop=True)
        rng = np.random.default_rng([context.seed, len(store), 23])
        counts = np.zeros(len(points), dtype=np.int64)
        np.add.at(counts, rng.choice(len(points), batch, replace=batch > len(points)), 1)
        exploiter = Exploiter(
            context.sampling_space,
            feature_space=context.space,
            objective=context.objectives[0],
            maximize=context.maximize,
        )
        measured = store.valid_samples()
        seen = context.sampling_space.key(store.load())
        return exploiter.propose(score.model, measured, points, counts, seen, rng)

    def _with_header_columns(
        self, optima: pd.DataFrame, selector: Selector, score: EvidenceScore
    ) -> pd.DataFrame:
        """optima with, per grid point, the best measured value there, the header's measured
        regret against it (NaN where either is unknown) and whether the header's answer
        failed there (``header_failed``: every run of it at those inputs failed)."""
        objective = self.context.objectives[0]
        evidence = score.evidence
        inputs = self.context.space.input_names
        best = evidence.table.sort_values("_f", kind="stable").drop_duplicates(inputs)
        best = best[[*inputs, "_f"]].rename(columns={"_f": "_best"})
        merged = optima[inputs].merge(best, on=inputs, how="left")
        best_signed = merged["_best"].to_numpy(dtype=np.float64)
        answers = self.decisions.answers(selector, optima)
        found = evidence.match(answers)
        count = found["_n"].to_numpy()
        header = evidence.to_objective(found["_f"].to_numpy())
        reference = evidence.to_objective(best_signed)
        regret = evidence.sign * (header - reference) / np.abs(reference)
        out = optima.copy()
        out[f"best_measured_{objective}"] = reference
        out[f"header_measured_{objective}"] = np.where(count > 0, header, np.nan)
        out["header_measured_regret"] = np.where(count > 0, np.maximum(regret, 0.0), np.nan)
        out["header_failed"] = found["_failed"].to_numpy()
        out["header_regret"] = regret_against_best_known(
            score, answers, optima, best_signed, objective
        )
        return out

    def _details(self, optima: pd.DataFrame, spent: dict[str, int], rounds: int) -> dict[str, Any]:
        """What verification.json says about the confirmation and the measured regret."""
        objective = self.context.objectives[0]
        regret = optima["header_measured_regret"].to_numpy(dtype=np.float64)
        known = regret[np.isfinite(regret)]
        details: dict[str, Any] = {
            "confirmation": {
                "rounds": rounds,
                "measured_edges": spent["edges"],
                "measured_answers": spent["answers"],
                "remeasured_answers": spent["remeasured"],
                "measured_neighbours": spent["neighbours"],
                "unconfirmed_answers": spent["unconfirmed"],
                "measured_instead": spent["measured_instead"],
            },
            "measured_regret": {
                "points": len(regret),
                "known": len(known),
                "mean": float(known.mean()) if len(known) else None,
                "max": float(known.max()) if len(known) else None,
                "above_1_percent": int(np.count_nonzero(known > 0.01)),
                "failed": int(np.count_nonzero(optima["header_failed"])),
            },
            "regret_against_best_known": regret_summary(optima["header_regret"]),
        }
        if len(optima) <= LISTED_POINTS:
            columns = [
                *self.context.space.input_names,
                f"best_measured_{objective}",
                f"header_measured_{objective}",
                "header_measured_regret",
            ]
            details["per_point"] = [
                {
                    k: (None if isinstance(v, float) and not np.isfinite(v) else plain(v))
                    for k, v in row.items()
                }
                for row in optima[columns].to_dict("records")
            ]
        return details


__all__ = ["CONFIRM_ROUNDS", "ConfirmationStage"]
