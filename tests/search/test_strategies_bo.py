"""The reusable Bayesian-optimization core: the incremental GP posterior is exact, the
acquisitions have their textbook properties, ``propose`` picks sensible distinct candidates."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor

from mlkaps_gpu.search import Embedding
from mlkaps_gpu.surrogate import CandidateGaussianProcess, acquisition_values, propose


def bowl(points: np.ndarray) -> np.ndarray:
    return ((points - 0.7) ** 2).sum(axis=1)


def test_incremental_posterior_equals_a_full_refit() -> None:
    rng = np.random.default_rng(0)
    candidates = rng.random((200, 3))
    points = rng.random((25, 3))
    targets = bowl(points)
    model = CandidateGaussianProcess(candidates, seed=0).fit(points[:10], targets[:10])
    for point, target in zip(points[10:], targets[10:], strict=True):
        model.add(point, target)
    # the same kernel, conditioned on all 25 at once
    noise = model.kernel_.k2.noise_level
    reference = GaussianProcessRegressor(model.kernel_, alpha=1e-8, optimizer=None)
    reference.fit(points, (targets - model.offset_) / model.scale_)
    mean, std = reference.predict(candidates, return_std=True)
    assert np.allclose(model.mean_, model.offset_ + model.scale_ * mean, atol=1e-6)
    latent = np.sqrt(np.maximum(std**2 - noise, 0.0))
    assert np.allclose(model.std_, model.scale_ * latent, atol=1e-5)
    # the capacity grew past its initial size without losing anything
    check_mean, check_std = model.predict(candidates[:5])
    assert np.allclose(check_mean, model.mean_[:5]) and np.allclose(check_std, model.std_[:5])


def test_acquisitions() -> None:
    mean = np.array([0.0, 1.0, -1.0, 0.0])
    std = np.array([1.0, 1.0, 0.0, 0.0])
    ei = acquisition_values("ei", mean, std, 0.0, exploration=0.0)
    pi = acquisition_values("pi", mean, std, 0.0, exploration=0.0)
    lcb = acquisition_values("lcb", mean, std, 0.0, kappa=2.0)
    assert ei[0] == pytest.approx(1 / np.sqrt(2 * np.pi))  # E[max(0, -Z)]
    assert ei[2] == pytest.approx(1.0) and ei[3] == 0.0  # certain improvement of 1, and none
    assert (ei >= 0).all() and ((pi >= 0) & (pi <= 1)).all()
    assert pi[0] == pytest.approx(0.5)
    assert np.allclose(lcb, [2.0, 1.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="acquisition"):
        acquisition_values("ucb", mean, std, 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("acquisition", ["ei", "pi", "lcb", ("ei", "pi", "lcb")])
def test_propose_picks_distinct_allowed_candidates(acquisition: object) -> None:
    embedding = Embedding(np.array([11, 11]))
    grid = np.indices((11, 11)).reshape(2, -1).T
    candidates = embedding.to_unit(grid)
    rng = np.random.default_rng(1)
    measured = rng.choice(len(candidates), 12, replace=False)
    exclude = np.zeros(len(candidates), dtype=bool)
    exclude[measured] = True
    picks = propose(
        candidates[measured],
        bowl(candidates[measured]),
        candidates,
        4,
        acquisition=acquisition,  # type: ignore[arg-type]
        exclude=exclude,
    )
    assert len(picks) == len(set(picks.tolist())) == 4
    assert not exclude[picks].any()
    # the first pick lies closer to the minimum than the typical candidate
    distance = np.abs(candidates - 0.7).sum(axis=1)
    assert distance[picks[0]] < np.median(distance)


def test_propose_with_nothing_left() -> None:
    candidates = np.random.default_rng(0).random((5, 2))
    picks = propose(candidates, bowl(candidates), candidates, 3, exclude=np.ones(5, dtype=bool))
    assert len(picks) == 0


def test_embedding_round_trip() -> None:
    embedding = Embedding(np.array([4, 1, 3]))
    codes = np.array([[0, 0, 0], [3, 0, 2], [1, 0, 1]])
    assert embedding.dimensions == 2
    assert np.array_equal(embedding.to_codes(embedding.to_unit(codes)), codes)
    assert np.array_equal(
        embedding.to_codes(np.array([[1.0, 1.0], [0.0, -0.5]])), [[3, 0, 2], [0, 0, 0]]
    )


def test_propose_rows_on_tables() -> None:
    """The table entry point for samplers: inputs and designs in the unit cube."""
    from mlkaps_gpu.search import propose_rows, unit_features
    from mlkaps_gpu.space import Parameter, Space

    space = Space(
        [Parameter("n", "int", low=16, high=1024, log=True)],
        [
            Parameter("b", "int", values=(1, 2, 4, 8)),
            Parameter("mode", "categorical", values=("a", "b")),
        ],
    )
    rng = np.random.default_rng(0)
    rows = space.sample_valid(40, rng)
    features = unit_features(space, rows)
    assert features.shape == (40, 3) and (features >= 0).all() and (features <= 1).all()
    time = (
        np.log2(rows["n"])
        * (1 + np.abs(np.log2(rows["b"]) - 2))
        * np.where(rows["mode"] == "a", 1.0, 1.5)
    )
    values = time.to_numpy().copy()
    values[:3] = np.nan  # failures are left out of the model
    picks = propose_rows(space, rows.iloc[:20], values[:20], rows.iloc[20:], 3)
    assert len(set(picks.tolist())) == 3 and (picks < 20).all()
