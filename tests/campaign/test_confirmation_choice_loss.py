"""Decision 0047: the confirmation spends a reserve too small for every answer where the choice
is least certain (the largest expected loss against the point's best rival), not where the
answer's own estimate is widest."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from mlkaps_gpu.campaign._decisions import DECIDE_KAPPA, Evidence, EvidenceScore, choice_losses
from mlkaps_gpu.campaign._stage_confirmation import ConfirmationStage
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.surrogate import BootstrapEnsemble


def space(values: tuple[int, ...] = tuple(range(1, 11))) -> Space:
    return Space(
        [Parameter("gpu", "categorical", values=("a", "b"))],
        [Parameter("x", "int", values=values)],
    )


class PointModel(BootstrapEnsemble):
    """Mean and sd (log space) per (gpu code, x); (3.0, sd of the point) where not given."""

    def __init__(self, given: dict[tuple[int, int], tuple[float, float]]) -> None:
        super().__init__(members=2, log_target=True)
        self.given = given

    def predict_log(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = [(int(g), int(x)) for g, x in features[:, [0, -1]]]
        default = {g: sd for (g, _), (_, sd) in self.given.items()}
        mean = np.array([self.given.get(k, (3.0, default[k[0]]))[0] for k in keys])
        sd = np.array([self.given.get(k, (3.0, default[k[0]]))[1] for k in keys])
        return mean, sd

    def _predict(self, features: np.ndarray) -> np.ndarray:
        return np.exp(self.predict_log(features)[0])


def no_samples() -> pd.DataFrame:
    return pd.DataFrame(
        {"gpu": pd.Series([], dtype=object), "x": pd.Series([], dtype=np.int64)}
    ).assign(time=np.zeros(0), status=pd.Series([], dtype=object))


def answers() -> pd.DataFrame:
    return pd.DataFrame({"gpu": ["a", "b"], "x": [1, 1]})


def score(sp: Space, model: PointModel) -> EvidenceScore:
    return EvidenceScore(Evidence(no_samples(), sp, "time"), model, sp)


def expected_loss(gap: float, scale: float) -> float:
    z = gap / scale
    return scale * (norm.pdf(z) - z * norm.sf(z))


# at a: the answer's level is uncertain, but every rival is far behind it;
# at b: the level is known closely, and x = 2 is within the spread of the answer
MODEL = {(0, 1): (0.0, 0.5), (1, 1): (0.0, 0.05), (1, 2): (0.02, 0.05)}


def test_the_loss_is_the_expected_lead_of_the_best_rival_over_the_answer() -> None:
    sp = space()
    loss = choice_losses(answers(), score(sp, PointModel(MODEL)), sp)
    # a: rivals at 3.0 +- 0.5; b: x = 2 at 0.02 +- 0.05 (kappa * sd cancels: equal sds)
    assert loss[0] == pytest.approx(expected_loss(3.0, np.hypot(0.5, 0.5)))
    assert loss[1] == pytest.approx(expected_loss(0.02, np.hypot(0.05, 0.05)))
    assert loss[1] > 1000 * loss[0]


def test_an_answer_with_no_rival_loses_nothing() -> None:
    sp = space(values=(1,))
    assert (choice_losses(answers(), score(sp, PointModel(MODEL)), sp) == 0.0).all()


def test_a_rival_ahead_of_the_answer_loses_at_least_its_lead() -> None:
    sp = space()
    model = PointModel({(0, 1): (0.1, 0.1), (0, 4): (0.0, 0.2), (1, 1): (0.0, 0.1)})
    loss = choice_losses(answers().iloc[:1], score(sp, model), sp)
    lead = (0.1 + DECIDE_KAPPA * 0.1) - (0.0 + DECIDE_KAPPA * 0.2)
    assert loss[0] == pytest.approx(expected_loss(-lead, np.hypot(0.1, 0.2)))
    assert loss[0] > lead


def test_at_the_same_margin_the_wider_spread_loses_more() -> None:
    """The same lead in units of the spread: the wider spread can lose more."""
    sp = space()
    model = PointModel(
        {(0, 1): (0.0, 0.5), (0, 2): (0.2, 0.5), (1, 1): (0.0, 0.05), (1, 2): (0.02, 0.05)}
    )
    loss = choice_losses(answers(), score(sp, model), sp)
    assert loss[0] == pytest.approx(10 * loss[1])


def least_certain(sp: Space, model: PointModel, n: int) -> pd.DataFrame:
    stage = SimpleNamespace(context=SimpleNamespace(space=sp, seed=0))
    return ConfirmationStage._least_certain(
        stage,  # type: ignore[arg-type]
        answers(),
        score(sp, model),
        n,
        0,
    )


def test_the_reserve_goes_to_the_choice_in_doubt_not_the_widest_estimate() -> None:
    # the widest estimate is a's (sd 0.5); the choice in doubt is b's
    assert least_certain(space(), PointModel(MODEL), 1)["gpu"].tolist() == ["b"]
    assert least_certain(space(), PointModel(MODEL), 2)["gpu"].tolist() == ["a", "b"]
