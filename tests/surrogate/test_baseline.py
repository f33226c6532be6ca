"""The inputs' baseline of the ensemble (decisions 0036, 0037)."""

from __future__ import annotations

import pickle

import numpy as np

from mlkaps_gpu.surrogate import BootstrapEnsemble
from mlkaps_gpu.surrogate._baseline import InputBaseline
from mlkaps_gpu.surrogate._settings import SurrogateSettings


def power_law(rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Columns m, gpu (categorical code), block; log time = 3 log m + gpu effect + block
    effect (block 2 best where m < 100, block 8 elsewhere)."""
    rng = np.random.default_rng(seed)
    m = np.exp(rng.uniform(np.log(16), np.log(1024), rows))
    gpu = rng.integers(0, 3, rows).astype(float)
    block = rng.choice([1.0, 2.0, 4.0, 8.0], rows)
    best = np.where(m < 100, 2.0, 8.0)
    log_time = 3.0 * np.log(m) + 0.5 * gpu + 0.2 * np.abs(np.log2(block / best))
    return np.column_stack([m, gpu, block]), np.exp(log_time)


def test_the_baseline_is_a_power_law_of_the_positive_inputs_and_one_hot_categories():
    x = np.column_stack([np.geomspace(10, 1000, 60), np.tile([0.0, 1.0, 2.0], 20)])
    target = 1.5 + 2.0 * np.log(x[:, 0]) + np.array([0.0, 0.3, -0.2])[x[:, 1].astype(int)]
    baseline = InputBaseline([0, 1], categorical=[1]).fit(x, target)
    np.testing.assert_allclose(baseline.predict(x), target, atol=0.02)
    assert baseline.logs_ == [0]
    unseen = np.array([[100.0, 7.0]])  # a level never trained on adds nothing
    assert np.isfinite(baseline.predict(unseen)).all()
    # a column that is not positive everywhere is taken as it is, not logged
    signed = np.column_stack([np.linspace(-1, 1, 30)])
    assert InputBaseline([0]).fit(signed, 2.0 * signed[:, 0]).logs_ == []


def test_the_baseline_follows_a_fixed_cost_that_bends_the_power_law():
    """A launch-like fixed cost: log time flat at small sizes, the work's power law at large
    ones. The second-order terms follow the bend that the best straight line in the logs
    misses by much more; an input's pairwise products enter too (two numeric inputs)."""
    rng = np.random.default_rng(0)
    m = np.exp(rng.uniform(np.log(16), np.log(4096), 300))
    n = np.exp(rng.uniform(np.log(16), np.log(4096), 300))
    target = np.log(20e-6 + 1e-12 * m * m * n)
    x = np.column_stack([m, n])
    fitted = InputBaseline([0, 1]).fit(x, target).predict(x)
    logs = np.column_stack([np.ones(300), np.log(m), np.log(n)])
    plane = logs @ np.linalg.lstsq(logs, target, rcond=None)[0]
    rms = lambda r: float(np.sqrt(np.mean(r**2)))  # noqa: E731
    assert rms(fitted - target) < 0.4 * rms(plane - target)
    # one input: the square alone; the fit of a pure power law stays exact
    single = np.geomspace(10, 1000, 50)[:, None]
    exact = InputBaseline([0]).fit(single, 3.0 * np.log(single[:, 0]))
    np.testing.assert_allclose(exact.predict(single), 3.0 * np.log(single[:, 0]), atol=0.01)


def test_members_learn_what_the_inputs_leave_and_predictions_add_it_back():
    x, y = power_law(400)
    model = BootstrapEnsemble(
        categorical_features=[1], baseline_features=[0, 1], seed=1, n_estimators=100
    ).fit(x, y)
    assert model.baseline_ is not None
    # the members' own trees learn the residual: small against the inputs' range
    trees_only = np.vstack([b.predict(x) for b in model.boosters_]).mean(axis=0)
    assert np.abs(trees_only).max() < 1.0 < np.ptp(np.log(y))
    mean, _ = model.predict_log(x)
    assert np.sqrt(np.mean((mean - np.log(y)) ** 2)) < 0.05
    # at each m the model ranks the blocks as the truth does
    for m in (30.0, 600.0):
        rows = np.column_stack([np.full(4, m), np.zeros(4), [1.0, 2.0, 4.0, 8.0]])
        assert rows[np.argmin(model.predict(rows)), 2] == (2.0 if m < 100 else 8.0)
    # a pickled model predicts the same
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_allclose(again.predict(x[:20]), model.predict(x[:20]))


def test_without_a_numeric_input_or_with_the_setting_off_there_is_no_baseline():
    x, y = power_law(100)
    plain = BootstrapEnsemble(categorical_features=[1], seed=1, n_estimators=20).fit(x, y)
    assert plain.baseline_ is None
    off = SurrogateSettings(input_baseline=False)
    assert BootstrapEnsemble.from_settings(off, input_features=[0, 1]).baseline_features == []
    on = BootstrapEnsemble.from_settings(SurrogateSettings(), input_features=[0, 1])
    assert on.baseline_features == [0, 1]
    # one numeric input among categorical ones is enough; categorical inputs alone: none
    mixed = BootstrapEnsemble.from_settings(
        SurrogateSettings(), categorical_features=[1, 2], input_features=[0, 1]
    )
    assert mixed.baseline_features == [0, 1]
    categorical = BootstrapEnsemble.from_settings(
        SurrogateSettings(), categorical_features=[0, 2], input_features=[0]
    )
    assert categorical.baseline_features == []
    # an ensemble made before baselines (no attribute) predicts with its members alone
    del plain.baseline_
    assert np.isfinite(plain.predict(x)).all()


def test_a_value_past_the_training_range_takes_the_trend_at_its_end():
    """An alignment input (``k % 8``) whose sampled rows happened to be all positive is fitted
    in the logs; a shape where it is 0 (log -708, squared 5e5) once made the prediction
    overflow and every regret NaN. Past the range, a column takes its value at the nearest
    end: the prediction stays finite, the same as at that end."""
    rng = np.random.default_rng(0)
    align = rng.integers(1, 8, 200).astype(float)
    k = np.exp(rng.uniform(np.log(16), np.log(4096), 200))
    target = np.log(k) + 0.1 * align + 0.05 * np.log(k) * np.log(align)
    x = np.column_stack([align, k])
    baseline = InputBaseline([0, 1]).fit(x, target)
    assert baseline.logs_ == [0, 1]
    at_zero, at_low = baseline.predict(np.array([[0.0, 100.0], [align.min(), 100.0]]))
    assert np.isfinite(at_zero) and at_zero == at_low
    far, at_high = baseline.predict(np.array([[3.0, 1e12], [3.0, k.max()]]))
    assert far == at_high
    # inside the range nothing changes: the fit still follows the target
    np.testing.assert_allclose(baseline.predict(x), target, atol=0.05)
    model = BootstrapEnsemble(baseline_features=[0, 1], seed=0, n_estimators=20)
    model.fit(x, np.exp(target))
    assert np.isfinite(model.predict(np.array([[0.0, 100.0], [0.0, 1e12]]))).all()
