"""A LightGBM model as flat node tables, the input of the compiled prediction engine.

LightGBM's text format (``Booster.model_to_string``) lists, per tree, the internal nodes'
``split_feature``, ``threshold``, ``decision_type``, ``left_child`` / ``right_child`` (a negative
child ``c`` is leaf ``~c``), the leaves' ``leaf_value`` and, for categorical splits, bitsets
(``cat_boundaries`` / ``cat_threshold``). Thresholds and leaf values are written with 17
significant digits, so the tables hold the booster's doubles exactly.

The tables are laid out for a branch-free walk (see ``_compiled.py``):

- every node tests ``column > threshold`` and goes to ``right`` when true, ``left`` else;
- a leaf is a node whose two children are itself, so every row of a tree takes exactly the
  tree's depth in steps and the leaf is ``node - internal nodes``;
- a split that is not a plain numerical test (a categorical bitset, a split whose missing values
  are zeros or NaNs) reads a *predicate column*: once per row, the engine evaluates the split's
  exact LightGBM rule to 1.0 (go right) or 0.0, and the node compares it with 0.5. Identical
  splits share one column.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

#: One node as the C engine reads it (24 bytes).
NODE_DTYPE = np.dtype(
    [("threshold", "<f8"), ("column", "<i4"), ("left", "<i4"), ("right", "<i4"), ("pad", "<i4")]
)
#: One predicate column: the exact LightGBM rule of a split that is not a plain ``x <= t``.
PREDICATE_DTYPE = np.dtype(
    [
        ("threshold", "<f8"),
        ("feature", "<i4"),
        ("kind", "<i4"),  # 0 categorical bitset, 1 zero is missing, 2 NaN is missing
        ("default_left", "<i4"),
        ("first_word", "<i4"),
        ("n_words", "<i4"),
        ("pad", "<i4"),
    ]
)
_CATEGORICAL, _ZERO_MISSING, _NAN_MISSING = 0, 1, 2
_ARRAYS = (
    "nodes",
    "node_offsets",
    "internal_counts",
    "depths",
    "leaf_values",
    "leaf_offsets",
    "predicates",
    "category_bits",
)


class UnsupportedModelError(ValueError):
    """The model uses a feature the engine does not implement (linear trees, several classes)."""


@dataclass(frozen=True)
class ForestTables:
    """Every tree of one model, concatenated, in the engine's layout.

    Attributes:
        nodes: nodes of all trees (``NODE_DTYPE``), each tree's internal nodes then its leaves;
            children index the tree's own nodes.
        node_offsets: first node of each tree, ``(trees + 1,)``.
        internal_counts: internal nodes per tree (a tree's leaf ``k`` is node
            ``internal_counts[t] + k``).
        depths: steps of each tree's walk (its depth; 0 for a single-leaf tree).
        leaf_values: leaf outputs of all trees.
        leaf_offsets: first leaf of each tree, ``(trees + 1,)``.
        predicates: the predicate columns (``PREDICATE_DTYPE``); column ``n_features + k`` of a
            row is predicate ``k``.
        category_bits: the 32-bit words of the categorical bitsets.
        n_features: features a row must have.
        digest: SHA-256 of the model text the tables were read from.
    """

    nodes: np.ndarray
    node_offsets: np.ndarray
    internal_counts: np.ndarray
    depths: np.ndarray
    leaf_values: np.ndarray
    leaf_offsets: np.ndarray
    predicates: np.ndarray
    category_bits: np.ndarray
    n_features: int
    digest: str

    @property
    def n_trees(self) -> int:
        return len(self.node_offsets) - 1

    def save(self, path: str | Path | BinaryIO) -> None:
        """Write the tables as an uncompressed ``.npz`` (read back by :meth:`load`) to a
        path (written as named: no ``.npz`` added) or an open binary file."""
        if isinstance(path, (str, Path)):
            with open(path, "wb") as handle:
                self.save(handle)
            return
        arrays = {name: getattr(self, name) for name in _ARRAYS}
        np.savez(path, **arrays, n_features=np.int64(self.n_features), digest=np.str_(self.digest))

    @classmethod
    def load(cls, path: str | Path) -> ForestTables:
        with np.load(path, allow_pickle=False) as data:
            return cls(
                **{name: data[name] for name in _ARRAYS},
                n_features=int(data["n_features"]),
                digest=str(data["digest"]),
            )


def model_digest(model_text: str) -> str:
    """SHA-256 of a model's text format: the key of its cached tables."""
    return hashlib.sha256(model_text.encode("utf-8")).hexdigest()


def read_tables(model_text: str) -> ForestTables:
    """Engine tables of a LightGBM model given as its text format.

    Raises:
        UnsupportedModelError: linear trees, several trees per iteration, or averaged output.
    """
    header, _, body = model_text.partition("\nTree=")
    header_lines = header.splitlines()
    settings = _key_values(header_lines)
    if int(settings.get("num_tree_per_iteration", "1")) != 1:
        raise UnsupportedModelError("several trees per iteration (multi-class models)")
    if "average_output" in header_lines:
        raise UnsupportedModelError("averaged output (random forest mode)")
    n_features = int(settings["max_feature_idx"]) + 1
    builder = _Builder(n_features)
    sections = body.split("end of trees", 1)[0].split("\nTree=") if body else []
    for section in sections:
        builder.add_tree(_key_values(section.splitlines()[1:]))
    return builder.tables(model_digest(model_text))


class _Builder:
    """Accumulates trees in the engine layout, sharing identical predicate columns."""

    def __init__(self, n_features: int) -> None:
        self.n_features = n_features
        self.nodes: list[np.ndarray] = []
        self.leaves: list[np.ndarray] = []
        self.internal: list[int] = []
        self.depths: list[int] = []
        self.bits: list[int] = []
        self.predicates: dict[tuple[object, ...], int] = {}
        self.predicate_rows: list[tuple[float, int, int, int, int, int, int]] = []

    def add_tree(self, tree: dict[str, str]) -> None:
        if tree.get("is_linear", "0") != "0":
            raise UnsupportedModelError("linear trees")
        leaf_values = _floats(tree["leaf_value"])
        n_leaves = len(leaf_values)
        n_internal = int(tree["num_leaves"]) - 1
        table = np.zeros(n_internal + n_leaves, dtype=NODE_DTYPE)
        leaves = np.arange(n_internal, n_internal + n_leaves, dtype=np.int32)
        table["left"][n_internal:] = leaves  # a leaf loops on itself
        table["right"][n_internal:] = leaves
        if n_internal:
            left, right = _ints(tree["left_child"]), _ints(tree["right_child"])
            table["left"][:n_internal] = np.where(left < 0, n_internal + ~left, left)
            table["right"][:n_internal] = np.where(right < 0, n_internal + ~right, right)
            table["threshold"][:n_internal] = _floats(tree["threshold"])
            table["column"][:n_internal] = _ints(tree["split_feature"])
            self._predicate_columns(tree, table[:n_internal])
        self.nodes.append(table)
        self.leaves.append(leaf_values)
        self.internal.append(n_internal)
        self.depths.append(_depth(table, n_internal))

    def _predicate_columns(self, tree: dict[str, str], internal: np.ndarray) -> None:
        """Point every split that is not a plain ``x <= t`` at its predicate column."""
        decision = _ints(tree["decision_type"])
        missing = (decision >> 2) & 3
        special = np.flatnonzero(((decision & 1) == 1) | (missing == 1) | (missing == 2))
        if len(special) == 0:
            return
        bounds = _ints(tree["cat_boundaries"]) if "cat_boundaries" in tree else np.zeros(1, int)
        words = _ints(tree["cat_threshold"]) if "cat_threshold" in tree else np.zeros(0, int)
        for node in special:
            feature, threshold = int(internal["column"][node]), float(internal["threshold"][node])
            default_left = int(decision[node] >> 1 & 1)
            if decision[node] & 1:
                local = int(threshold)
                bitset = tuple(int(w) for w in words[bounds[local] : bounds[local + 1]])
                key: tuple[object, ...] = (_CATEGORICAL, feature, bitset)
                if key not in self.predicates:
                    first = len(self.bits)
                    self.bits.extend(bitset)
                    row = (0.0, feature, _CATEGORICAL, 0, first, len(bitset), 0)
                    self._add_predicate(key, row)
            else:
                kind = int(missing[node])
                key = (kind, feature, threshold, default_left)
                if key not in self.predicates:
                    self._add_predicate(key, (threshold, feature, kind, default_left, 0, 0, 0))
            internal["column"][node] = self.n_features + self.predicates[key]
            internal["threshold"][node] = 0.5

    def _add_predicate(
        self, key: tuple[object, ...], row: tuple[float, int, int, int, int, int, int]
    ) -> None:
        self.predicates[key] = len(self.predicate_rows)
        self.predicate_rows.append(row)

    def tables(self, digest: str) -> ForestTables:
        sizes = [len(table) for table in self.nodes]
        return ForestTables(
            nodes=np.concatenate(self.nodes) if self.nodes else np.zeros(0, NODE_DTYPE),
            node_offsets=np.cumsum([0, *sizes]).astype(np.int64),
            internal_counts=np.asarray(self.internal, dtype=np.int32),
            depths=np.asarray(self.depths, dtype=np.int32),
            leaf_values=np.concatenate(self.leaves) if self.leaves else np.zeros(0),
            leaf_offsets=np.cumsum([0, *(len(v) for v in self.leaves)]).astype(np.int64),
            predicates=np.array(self.predicate_rows, dtype=PREDICATE_DTYPE),
            category_bits=np.asarray(self.bits, dtype=np.uint32),
            n_features=self.n_features,
            digest=digest,
        )


def _depth(table: np.ndarray, n_internal: int) -> int:
    """Depth of a tree: the longest path from the root (node 0) to a leaf."""
    if n_internal == 0:
        return 0
    # plain lists: reading a structured array's field per node costs more than the walk
    left = table["left"][:n_internal].tolist()
    right = table["right"][:n_internal].tolist()
    deepest, frontier = 0, [(0, 0)]
    while frontier:
        node, depth = frontier.pop()
        if node >= n_internal:
            deepest = max(deepest, depth)
            continue
        frontier.append((left[node], depth + 1))
        frontier.append((right[node], depth + 1))
    return deepest


def _key_values(lines: list[str]) -> dict[str, str]:
    pairs = (line.partition("=") for line in lines)
    return {key: value for key, sep, value in pairs if sep}


def _floats(text: str) -> np.ndarray:
    # Python's float() reads the 17-digit decimals back to the exact doubles
    return np.array([float(value) for value in text.split()], dtype=np.float64)


def _ints(text: str) -> np.ndarray:
    return np.array(text.split(), dtype=np.int64)
