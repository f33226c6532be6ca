"""The compiled prediction path gives LightGBM's predictions on every row, or falls back to it."""

from __future__ import annotations

import logging
import pickle

import lightgbm as lgb
import numpy as np
import pytest

from mlkaps_gpu.surrogate import LightGBMSurrogate
from mlkaps_gpu.surrogate import _compiled as compiled_module
from mlkaps_gpu.surrogate._compiled import compile_model, load_engine
from mlkaps_gpu.surrogate._forest import read_tables

pytestmark = pytest.mark.compiler


def _max_relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    scale = np.maximum(np.abs(a), np.abs(b))
    difference = np.abs(a - b)
    return float(np.max(np.where(scale > 0, difference / np.where(scale > 0, scale, 1), 0)))


def _training_data(rng: np.random.Generator, n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    """Numerical columns, one with NaNs, one mostly zeros, a 4-category and a 40-category one
    (bitsets of two 32-bit words)."""
    x = np.column_stack(
        [
            rng.uniform(-5, 5, n),
            np.where(rng.random(n) < 0.2, np.nan, rng.uniform(0, 100, n)),
            np.where(rng.random(n) < 0.5, 0.0, rng.normal(0, 1, n)),
            rng.integers(0, 4, n).astype(float),
            rng.integers(0, 40, n).astype(float),
        ]
    )
    y = (
        np.sin(x[:, 0])
        + np.nan_to_num(x[:, 1], nan=50.0) / 30
        + 2 * (x[:, 2] > 0.3)
        + np.array([0.0, 1.5, -1.0, 0.5])[x[:, 3].astype(int)]
        + (x[:, 4] % 7 == 3) * 2.0
        + rng.normal(0, 0.05, n)
    )
    return x, y


def _awkward_rows(rng: np.random.Generator, n: int = 4000) -> np.ndarray:
    """Rows that hit every special case of LightGBM's decision rules."""
    x, _ = _training_data(rng, n)
    x[::7, 0] = np.nan  # NaN where training had none: read as zero
    x[::11, 2] = 1e-40  # below LightGBM's zero threshold: read as zero
    x[::13, 2] = -1e-36
    x[::5, 2] = np.nan  # NaN in a zero-as-missing or NaN-as-missing column
    x[::17, 3] = -0.5  # truncates to category 0
    x[::19, 3] = -1.0  # negative category: right
    x[::23, 3] = np.nan
    x[::29, 4] = 1e12  # beyond the bitset and int range: right
    x[::31, 4] = 63.0  # beyond the bitset's words: right
    x[::37, 4] = 33.9  # second word of the bitset
    return x


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"zero_as_missing": True},
        {"use_missing": False},
        {"num_leaves": 63, "min_data_in_leaf": 1, "max_cat_to_onehot": 8},
    ],
    ids=["default", "zero-missing", "no-missing", "deep"],
)
def test_compiled_equals_lightgbm_on_every_row(params: dict[str, object]) -> None:
    rng = np.random.default_rng(0)
    x, y = _training_data(rng)
    model = LightGBMSurrogate(
        categorical_features=[3, 4], n_estimators=60, params=params, engine="compiled"
    ).fit(x, y)
    rows = _awkward_rows(np.random.default_rng(1))
    expected = model.booster_.predict(rows, num_threads=1)
    got = model.predict(rows)
    assert model.compiled() is not None
    np.testing.assert_array_equal(got, expected)  # bit for bit, so within 1e-12 relative too
    assert _max_relative_difference(got, expected) <= 1e-12


def test_tables_cover_every_kind_of_split() -> None:
    rng = np.random.default_rng(0)
    x, y = _training_data(rng)
    model = LightGBMSurrogate(categorical_features=[3, 4], n_estimators=60).fit(x, y)
    tables = read_tables(model.booster_.model_to_string())
    kinds = set(tables.predicates["kind"].tolist())
    assert 0 in kinds  # categorical bitsets
    assert 2 in kinds  # NaN as missing (the column with NaNs)
    assert (tables.predicates["n_words"] == 2).any()  # a 40-category bitset
    zero_missing = LightGBMSurrogate(
        categorical_features=[3, 4], n_estimators=60, params={"zero_as_missing": True}
    ).fit(x, y)
    assert 1 in read_tables(zero_missing.booster_.model_to_string()).predicates["kind"]


def test_log_target_threads_and_single_leaf_trees() -> None:
    rng = np.random.default_rng(2)
    x = rng.uniform(1, 10, (300, 3))
    y = x[:, 0] * x[:, 1] + 1
    # a huge min_data_in_leaf after a few rounds still leaves stumps: single-leaf trees
    model = LightGBMSurrogate(
        n_estimators=40, log_target=True, params={"min_data_in_leaf": 140}, engine="compiled"
    ).fit(x, y)
    tables = read_tables(model.booster_.model_to_string())
    assert (tables.depths <= 1).any()
    rows = rng.uniform(0, 11, (20_000, 3))
    expected = np.exp(model.booster_.predict(rows, num_threads=1))
    compiled = model.compiled()
    assert compiled is not None
    np.testing.assert_array_equal(model.predict(rows), expected)
    np.testing.assert_array_equal(np.exp(compiled.predict(rows, threads=2)), expected)


def test_auto_engine_compiles_only_for_bulk_predictions() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, (200, 2))
    model = LightGBMSurrogate(n_estimators=10).fit(x, x[:, 0])
    model.predict(x[:10])
    assert "_compiled" not in model.__dict__
    model.predict(rng.uniform(0, 1, (5000, 2)))
    assert model.compiled() is not None
    lightgbm_only = LightGBMSurrogate(n_estimators=10, engine="lightgbm").fit(x, x[:, 0])
    lightgbm_only.predict(rng.uniform(0, 1, (5000, 2)))
    assert lightgbm_only.compiled() is None
    with pytest.raises(ValueError, match="unknown prediction engine"):
        LightGBMSurrogate(engine="llvm")  # type: ignore[arg-type]


def test_refit_drops_the_previous_compiled_model() -> None:
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, (200, 2))
    model = LightGBMSurrogate(n_estimators=10, engine="compiled").fit(x, x[:, 0])
    first = model.compiled()
    model.fit(x, x[:, 1])
    second = model.compiled()
    assert second is not None and second is not first
    np.testing.assert_array_equal(model.predict(x), model.booster_.predict(x))


def test_pickled_surrogate_predicts_the_same() -> None:
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, (200, 2))
    model = LightGBMSurrogate(n_estimators=10, engine="compiled").fit(x, x[:, 0] + x[:, 1])
    rows = rng.uniform(0, 1, (3000, 2))
    before = model.predict(rows)
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.predict(rows), before)


def test_saved_model_caches_engine_and_tables_in_the_user_cache(tmp_path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("MLKAPS_GPU_CACHE", str(cache))
    monkeypatch.setattr(compiled_module, "_engines", {})
    models = tmp_path / "models"
    models.mkdir()
    rng = np.random.default_rng(6)
    x = rng.uniform(0, 1, (200, 2))
    LightGBMSurrogate(n_estimators=10).fit(x, x[:, 0]).save(str(models / "time.txt"))
    rows = rng.uniform(0, 1, (3000, 2))
    loaded = LightGBMSurrogate.load(str(models / "time.txt"), engine="compiled")
    expected = loaded.booster_.predict(rows)
    np.testing.assert_array_equal(loaded.predict(rows), expected)
    # nothing beside the model (a campaign directory is data): all in the user's cache
    assert sorted(p.name for p in models.iterdir()) == ["time.txt"]
    assert len(list((cache / "forest").glob("forest-*.npz"))) == 1
    assert len(list((cache / "forest").glob("_mlkaps_forest_*.so"))) == 1

    # a new process finds both: nothing is compiled again
    def no_build(folder: object) -> object:
        raise AssertionError("the cached engine should have been used")

    monkeypatch.setattr(compiled_module, "_engines", {})
    monkeypatch.setattr(compiled_module, "_build", no_build)
    again = LightGBMSurrogate.load(str(models / "time.txt"), engine="compiled")
    np.testing.assert_array_equal(again.predict(rows), expected)


def test_fallback_to_lightgbm_is_logged_once(tmp_path, monkeypatch, caplog) -> None:
    def failing_build(folder: object) -> object:
        raise RuntimeError("no C compiler here")

    monkeypatch.setenv("MLKAPS_GPU_CACHE", str(tmp_path / "empty-cache"))

    monkeypatch.setattr(compiled_module, "_engines", {})
    monkeypatch.setattr(compiled_module, "_unavailable", {})
    monkeypatch.setattr(compiled_module, "_build", failing_build)
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, (200, 2))
    rows = rng.uniform(0, 1, (3000, 2))
    with caplog.at_level(logging.WARNING, logger="mlkaps_gpu"):
        for _ in range(3):
            model = LightGBMSurrogate(n_estimators=10, cache_dir=tmp_path).fit(x, x[:, 0])
            np.testing.assert_array_equal(model.predict(rows), model.booster_.predict(rows))
            assert model.compiled() is None
    messages = [r.getMessage() for r in caplog.records if "engine unavailable" in r.getMessage()]
    assert len(messages) == 1 and "no C compiler here" in messages[0]
    assert load_engine(tmp_path) is None
    strict = LightGBMSurrogate(n_estimators=10, engine="compiled").fit(x, x[:, 0])
    with pytest.raises(RuntimeError, match="unavailable"):
        strict.predict(rows)


def test_unsupported_model_falls_back() -> None:
    rng = np.random.default_rng(8)
    x = rng.uniform(0, 1, (300, 2))
    booster = lgb.train(
        {"objective": "regression", "linear_tree": True, "verbose": -1},
        lgb.Dataset(x, label=2 * x[:, 0] + x[:, 1]),
        num_boost_round=5,
    )
    assert compile_model(booster.model_to_string()) is None
