"""The compiled prediction path: a branch-free C walk of LightGBM's trees, through cffi.

LightGBM's ``predict`` walks each tree with a data-dependent branch per node; on the random
(input, configuration) rows of the optimizers, about half of those branches mispredict. The
engine here walks the trees of :mod:`~mlkaps_gpu.surrogate._forest`'s tables without a branch:
16 rows at a time advance one level per step (``node = child[column > threshold]``, leaves loop on
themselves), so the rows' walks overlap in the pipeline and no step depends on a prediction.
Splits that are not a plain ``x <= t`` (categorical bitsets, zero or NaN as missing) are evaluated
once per row into predicate columns. Each row sums its trees' leaves in tree order, in double,
as LightGBM does, so the result is LightGBM's to the bit.

The engine is one C file, the same for every model: it is compiled once (about a second) into a
cache folder and loaded by every model after it; a model's tables are read from its text once
and cached beside it. Where no C compiler (or cffi) can build the engine, :func:`load_engine`
returns ``None`` after saying why in the log, once, and the surrogate predicts with LightGBM.
"""

from __future__ import annotations

import io
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from mlkaps_gpu import user_cache
from mlkaps_gpu._files import write_atomically
from mlkaps_gpu.surrogate._forest import (
    ForestTables,
    UnsupportedModelError,
    model_digest,
    read_tables,
)

log = logging.getLogger("mlkaps_gpu")

_CDEF = """
typedef struct { double threshold; int32_t column; int32_t child[2]; int32_t pad; }
    mlkaps_node;
typedef struct { double threshold; int32_t feature; int32_t kind; int32_t default_left;
                 int32_t first_word; int32_t n_words; int32_t pad; } mlkaps_predicate;
int mlkaps_forest_predict(const double *x, int64_t n_rows, int64_t n_features,
                          const mlkaps_predicate *predicates, int64_t n_predicates,
                          const uint32_t *category_bits, const mlkaps_node *nodes,
                          const int64_t *node_offsets, const int32_t *internal_counts,
                          const int32_t *depths, const double *leaf_values,
                          const int64_t *leaf_offsets, int64_t n_trees, double *out);
"""

_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct { double threshold; int32_t column; int32_t child[2]; int32_t pad; }
    mlkaps_node;
typedef struct { double threshold; int32_t feature; int32_t kind; int32_t default_left;
                 int32_t first_word; int32_t n_words; int32_t pad; } mlkaps_predicate;

/* rows copied per block (their columns stay in L1 while every tree is walked) and rows whose
   walks advance together (independent loads that overlap) */
#define MLKAPS_BLOCK 64
#define MLKAPS_GROUP 16
/* LightGBM's kZeroThreshold (1e-35f as a double): smaller magnitudes are read as zero */
#define MLKAPS_ZERO 1.0000000180025095e-35

/* 1.0 where LightGBM's rule sends the row right, 0.0 where left */
static double mlkaps_predicate_right(const mlkaps_predicate *p, double value,
                                     const uint32_t *bits)
{
    if (p->kind == 0) { /* categorical: NaN, negative and out-of-set categories go right */
        if (!(value > -1.0 && value < 2147483648.0))
            return 1.0;
        int32_t category = (int32_t)value;
        if (category / 32 >= p->n_words)
            return 1.0;
        return ((bits[p->first_word + category / 32] >> (category % 32)) & 1u) ? 0.0 : 1.0;
    }
    if (p->kind == 1) { /* zero is missing (NaN read as zero) */
        if (isnan(value) || (value >= -MLKAPS_ZERO && value <= MLKAPS_ZERO))
            return p->default_left ? 0.0 : 1.0;
        return value <= p->threshold ? 0.0 : 1.0;
    }
    if (isnan(value)) /* NaN is missing */
        return p->default_left ? 0.0 : 1.0;
    return value <= p->threshold ? 0.0 : 1.0;
}

static void mlkaps_fill_block(const double *x, int64_t rows, int64_t n_features,
                              const mlkaps_predicate *predicates, int64_t n_predicates,
                              const uint32_t *bits, double *block)
{
    int64_t stride = n_features + n_predicates;
    for (int64_t r = 0; r < rows; ++r) {
        const double *row = x + r * n_features;
        double *out = block + r * stride;
        for (int64_t f = 0; f < n_features; ++f) {
            double value = row[f];
            /* a plain split reads NaN as zero; tiny values are zero in LightGBM's rows */
            out[f] = (isnan(value) || fabs(value) <= MLKAPS_ZERO) ? 0.0 : value;
        }
        for (int64_t k = 0; k < n_predicates; ++k) {
            double value = row[predicates[k].feature];
            if (fabs(value) <= MLKAPS_ZERO)
                value = 0.0;
            out[n_features + k] = mlkaps_predicate_right(predicates + k, value, bits);
        }
    }
}

int mlkaps_forest_predict(const double *x, int64_t n_rows, int64_t n_features,
                          const mlkaps_predicate *predicates, int64_t n_predicates,
                          const uint32_t *category_bits, const mlkaps_node *nodes,
                          const int64_t *node_offsets, const int32_t *internal_counts,
                          const int32_t *depths, const double *leaf_values,
                          const int64_t *leaf_offsets, int64_t n_trees, double *out)
{
    int64_t stride = n_features + n_predicates;
    double *block = malloc(sizeof(double) * (size_t)(MLKAPS_BLOCK * (stride > 0 ? stride : 1)));
    if (block == NULL)
        return -1;
    for (int64_t start = 0; start < n_rows; start += MLKAPS_BLOCK) {
        int64_t rows = n_rows - start < MLKAPS_BLOCK ? n_rows - start : MLKAPS_BLOCK;
        mlkaps_fill_block(x + start * n_features, rows, n_features, predicates, n_predicates,
                          category_bits, block);
        double *sum = out + start;
        for (int64_t r = 0; r < rows; ++r)
            sum[r] = 0.0;
        for (int64_t t = 0; t < n_trees; ++t) {
            const mlkaps_node *tree = nodes + node_offsets[t];
            const double *leaves = leaf_values + leaf_offsets[t] - internal_counts[t];
            int32_t depth = depths[t];
            for (int64_t first = 0; first < rows; first += MLKAPS_GROUP) {
                int32_t node[MLKAPS_GROUP] = {0};
                int64_t count = rows - first < MLKAPS_GROUP ? rows - first : MLKAPS_GROUP;
                const double *group = block + first * stride;
                for (int32_t step = 0; step < depth; ++step) {
                    for (int64_t g = 0; g < count; ++g) {
                        const mlkaps_node *n = tree + node[g];
                        /* an index, not a branch: nothing to mispredict */
                        node[g] = n->child[group[g * stride + n->column] > n->threshold];
                    }
                }
                /* tree by tree, in LightGBM's order: the same double sum */
                for (int64_t g = 0; g < count; ++g)
                    sum[first + g] += leaves[node[g]];
            }
        }
    }
    free(block);
    return 0;
}
"""

_COMPILE_ARGS = ["-O3"]  # no -march=native: the cache folder may be shared by machines
_MODULE = "_mlkaps_forest_" + user_cache.source_digest(_CDEF, _SOURCE, *_COMPILE_ARGS)[:16]
_engines: dict[str, Any] = {}
_unavailable: dict[str, str] = {}
_lock = threading.Lock()


def load_engine(cache_dir: str | Path | None = None) -> Any | None:
    """The compiled engine module, built once into the user's cache (see
    :mod:`mlkaps_gpu.user_cache`: keyed by the hash of its source, checked before loading).

    ``cache_dir`` is accepted for compatibility and not used: a module is never loaded from a
    campaign directory. Returns ``None`` when it cannot be built (no C compiler, no cffi); the
    first failure is logged once as a warning, and later calls return ``None`` without trying
    again.
    """
    del cache_dir
    with _lock:
        if _MODULE in _engines:
            return _engines[_MODULE]
        if _unavailable:
            return None
        try:
            module = user_cache.load_module("forest", _MODULE, _build)
        except (ImportError, OSError, RuntimeError) as error:
            reason = " ".join(str(error).split())[:300] or type(error).__name__
            _unavailable["reason"] = reason
            log.warning(
                "compiled surrogate engine unavailable (%s); predicting with LightGBM", reason
            )
            return None
        _engines[_MODULE] = module
        return module


def _build(folder: Path) -> Path:
    """Compile the engine in ``folder`` (a private folder of the cache); returns the file."""
    import cffi  # here: only a build needs it

    ffi = cffi.FFI()
    ffi.cdef(_CDEF)
    ffi.set_source(_MODULE, _SOURCE, extra_compile_args=_COMPILE_ARGS)
    try:
        return Path(ffi.compile(tmpdir=str(folder), verbose=False))
    except (cffi.VerificationError, cffi.CDefError) as error:
        raise RuntimeError(str(error)) from error


class CompiledForest:
    """A LightGBM model's raw prediction (before any output transform) by the compiled engine.

    Args:
        tables: the model's engine tables.
        engine: the module :func:`load_engine` returned.
    """

    def __init__(self, tables: ForestTables, engine: Any) -> None:
        self.tables = tables
        self.engine = engine
        ffi = engine.ffi
        self._keep = [
            np.ascontiguousarray(getattr(tables, name))
            for name in (
                "predicates",
                "category_bits",
                "nodes",
                "node_offsets",
                "internal_counts",
                "depths",
                "leaf_values",
                "leaf_offsets",
            )
        ]
        types = (
            "mlkaps_predicate *",
            "uint32_t *",
            "mlkaps_node *",
            "int64_t *",
            "int32_t *",
            "int32_t *",
            "double *",
            "int64_t *",
        )
        self._pointers = [
            ffi.cast(kind, ffi.from_buffer(array))
            for kind, array in zip(types, self._keep, strict=True)
        ]

    @property
    def n_features(self) -> int:
        return self.tables.n_features

    def predict(self, features: np.ndarray, *, threads: int = 1) -> np.ndarray:
        """Raw scores of the rows of a ``(rows, n_features)`` float64 matrix.

        Args:
            features: the feature matrix.
            threads: row chunks predicted at once (the engine releases the GIL).
        """
        features = np.ascontiguousarray(features, dtype=np.float64)
        if features.ndim != 2 or features.shape[1] != self.n_features:
            raise ValueError(
                f"expected a matrix of {self.n_features} features, got shape {features.shape}"
            )
        out = np.empty(len(features), dtype=np.float64)
        chunks = _chunks(len(features), threads)
        if len(chunks) <= 1:
            self._run(features, out)
            return out
        with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
            list(pool.map(lambda s: self._run(features[s], out[s]), chunks))
        return out

    def _run(self, features: np.ndarray, out: np.ndarray) -> None:
        ffi, tables = self.engine.ffi, self.tables
        (predicates, bits, nodes, node_offsets, internal, depths, leaves, leaf_offsets) = (
            self._pointers
        )
        status = self.engine.lib.mlkaps_forest_predict(
            ffi.cast("double *", ffi.from_buffer(features)),
            len(features),
            tables.n_features,
            predicates,
            len(tables.predicates),
            bits,
            nodes,
            node_offsets,
            internal,
            depths,
            leaves,
            leaf_offsets,
            tables.n_trees,
            ffi.cast("double *", ffi.from_buffer(out, require_writable=True)),
        )
        if status != 0:
            raise MemoryError("the compiled surrogate engine could not allocate its row block")


#: Rows below which a chunk is not worth a thread of its own.
_MIN_ROWS_PER_THREAD = 2048


def _chunks(n_rows: int, threads: int) -> list[slice]:
    count = max(1, min(threads, n_rows // _MIN_ROWS_PER_THREAD))
    bounds = np.linspace(0, n_rows, count + 1).astype(int)
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def compile_model(model_text: str, *, cache_dir: str | Path | None = None) -> CompiledForest | None:
    """The compiled predictor of a model given as LightGBM text, or ``None`` for LightGBM.

    The engine is built once into the user's cache (:mod:`mlkaps_gpu.user_cache`); with
    ``cache_dir``, the model's tables are cached there too (``forest-<digest>.npz``), so a
    campaign compiles nothing on its next run.
    ``None`` when the engine cannot be built or the model uses what the engine does not
    implement (both logged once).
    """
    engine = load_engine(cache_dir)
    if engine is None:
        return None
    try:
        tables = _cached_tables(model_text, cache_dir)
    except UnsupportedModelError as error:
        _log_once(f"model not compiled ({error}); predicting it with LightGBM")
        return None
    return CompiledForest(tables, engine)


def _cached_tables(model_text: str, cache_dir: str | Path | None) -> ForestTables:
    """The model's tables; with ``cache_dir``, kept as ``forest-<model digest>.npz`` in the
    user's cache (never in a campaign directory: the engine trusts the tables' indices)."""
    if cache_dir is None:
        return read_tables(model_text)
    path = user_cache.cache_folder("forest") / f"forest-{model_digest(model_text)[:32]}.npz"
    if path.exists():
        try:
            return ForestTables.load(path)
        except (OSError, ValueError, KeyError):
            log.info("%s: unreadable cached tables, rebuilding them", path)
    tables = read_tables(model_text)
    buffer = io.BytesIO()
    tables.save(buffer)
    write_atomically(path, buffer.getvalue())
    return tables


_logged: set[str] = set()


def _log_once(message: str) -> None:
    if message not in _logged:
        _logged.add(message)
        log.warning(message)
