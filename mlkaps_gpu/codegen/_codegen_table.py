"""Branch-free leaf lookup: per-feature threshold counts and a table of cells.

A tree over a few inputs cuts each input at a handful of thresholds; every test of the tree is
``x[j] <= t`` for one of them, so the leaf depends only on *which interval* of its thresholds
each input falls in. The lookup form of a leaf function therefore

1. counts, per input the tree uses, the thresholds the input exceeds (a fixed-length loop of
   comparisons without branches, which compilers vectorise: ``i += x > t[k]``);
2. reads the leaf from a table indexed by those counts.

With unpredictable inputs a nested ``if`` costs about one branch misprediction per two levels;
the lookup costs the same few nanoseconds for every input (``experiments/bench_tree_call.py``).

Exactness. scikit-learn tests ``float32(x) <= t`` with a double ``t``; since ``float32(x)`` is a
float, that equals ``float32(x) <= t32`` where ``t32`` is the largest float not above ``t``. The
thresholds are stored as those floats and compared with the inputs as floats (already rounded
to float32 by the feature function; float inputs beyond the float range clamped to +-FLT_MAX,
which every threshold lies between; integer inputs are far inside it), and each cell's leaf is
computed by walking the tree at a float inside the cell. Inputs that may be NaN go through the
nested-``if`` function, which holds the NaN policy; so does device code (``__CUDA_ARCH__``),
where a table in host memory is out of reach.
"""

from __future__ import annotations

import numpy as np

from mlkaps_gpu.codegen._c_literals import INDENT, double_literal
from mlkaps_gpu.trees import FLOAT32_MAX, TreeStructure

#: Largest table (cells) emitted; larger trees keep the nested ``if`` form only.
TABLE_LIMIT = 4096
#: Smallest tree (leaves) given a lookup: a test or two cost less than the counting loops.
MIN_LEAVES = 5
#: Threshold arrays are padded to a multiple of this (whole vector registers, no epilogue).
_PAD = 4
_FLOAT32_MAX_LITERAL = "3.40282347e+38f"


def float32_thresholds(tree: TreeStructure, feature: int) -> np.ndarray:
    """The distinct thresholds of ``feature`` as floats ``t32 <= t`` (largest such), sorted."""
    split = (tree.children_left != -1) & (tree.feature == feature)
    values = np.unique(tree.threshold[split])
    rounded = values.astype(np.float32)
    above = rounded.astype(np.float64) > values
    rounded[above] = np.nextafter(rounded[above], np.float32(-np.inf))
    return np.unique(rounded)


def table_layout(tree: TreeStructure, n_features: int) -> list[tuple[int, np.ndarray]] | None:
    """``[(feature, float32 thresholds)]`` of the features the tree tests, or None when the
    tree has fewer than :data:`MIN_LEAVES` leaves or its table would exceed
    :data:`TABLE_LIMIT` cells."""
    if tree.n_leaves < max(MIN_LEAVES, 2):
        return None
    layout = [
        (j, float32_thresholds(tree, j))
        for j in range(n_features)
        if np.any((tree.children_left != -1) & (tree.feature == j))
    ]
    cells = int(np.prod([len(t) + 1 for _, t in layout], dtype=np.float64))
    return layout if cells <= TABLE_LIMIT else None


def _representatives(thresholds: np.ndarray) -> np.ndarray:
    """One float per interval: at or below the first threshold, then just above each."""
    above = np.nextafter(thresholds, np.float32(np.inf))
    return np.concatenate([thresholds[:1], above]).astype(np.float64)


def cell_leaves(
    tree: TreeStructure, layout: list[tuple[int, np.ndarray]], n_features: int
) -> np.ndarray:
    """Leaf index of every cell, row-major over ``layout`` (last feature fastest)."""
    axes = [_representatives(t) for _, t in layout]
    mesh = np.meshgrid(*axes, indexing="ij")
    x = np.zeros((mesh[0].size, n_features))
    for (feature, _), values in zip(layout, mesh, strict=True):
        x[:, feature] = values.ravel()
    return tree.apply(x)  # the representatives are floats: apply's rounding keeps them


def _float_literal(value: float) -> str:
    return double_literal(float(value)) + "f"


def _array(c_type: str, name: str, items: list[str], per_line: int = 8) -> list[str]:
    lines = [f"{INDENT * 2}static const {c_type} {name}[{len(items)}] = {{"]
    for start in range(0, len(items), per_line):
        chunk = ", ".join(items[start : start + per_line])
        last = start + per_line >= len(items)
        lines.append(f"{INDENT * 3}{chunk}{'' if last else ','}")
    lines.append(f"{INDENT * 2}}};")
    return lines


def _padded_length(thresholds: np.ndarray) -> int:
    """The threshold count rounded up to a multiple of :data:`_PAD`."""
    return -(-len(thresholds) // _PAD) * _PAD


def _strides(layout: list[tuple[int, np.ndarray]]) -> list[int]:
    """Row-major strides of the cell table (last feature fastest)."""
    strides = []
    stride = 1
    for _, thresholds in reversed(layout):
        strides.append(stride)
        stride *= len(thresholds) + 1
    strides.reverse()
    return strides


def _count_block(
    position: int, feature: int, thresholds: np.ndarray, stride: int, *, nan_possible: bool
) -> list[str]:
    """A block adding ``stride`` times the number of thresholds ``t<position>`` that feature
    ``x[feature]`` exceeds to ``index``."""
    value = f"x[{feature}]"
    limit = double_literal(FLOAT32_MAX)
    # integer, bool and categorical features lie well inside the float range (|x| <
    # 2**63); only float inputs can exceed it (converting those is undefined in C)
    lines = [f"{INDENT * 2}{{"]
    if nan_possible:
        lines.append(f"{INDENT * 3}const float v = {value} <= {limit}")
        lines.append(
            f"{INDENT * 4}? ({value} >= -{limit} ? (float){value} : -{_FLOAT32_MAX_LITERAL})"
        )
        lines.append(f"{INDENT * 4}: {_FLOAT32_MAX_LITERAL};")
    else:
        lines.append(f"{INDENT * 3}const float v = (float){value};")
    lines.append(f"{INDENT * 3}int count = 0;")
    lines.append(f"{INDENT * 3}for (k = 0; k < {_padded_length(thresholds)}; ++k) {{")
    lines.append(f"{INDENT * 4}count += v > t{position}[k];")
    lines.append(f"{INDENT * 3}}}")
    multiplier = f" * {stride}" if stride != 1 else ""
    lines.append(f"{INDENT * 3}index += count{multiplier};")
    lines.append(f"{INDENT * 2}}}")
    return lines


def emit_table_leaf_function(
    tree: TreeStructure,
    name: str,
    branches: str,
    hd_macro: str,
    nan_possible: list[bool],
    layout: list[tuple[int, np.ndarray]],
) -> list[str]:
    """The lookup form of a leaf function named ``name``; ``branches`` is the nested-``if``
    function it defers to for NaN inputs and in device code."""
    n_features = len(nan_possible)
    leaves = cell_leaves(tree, layout, n_features)
    cell_type = "unsigned char" if tree.n_leaves <= 256 else "unsigned short"
    lines = [
        f"static inline {hd_macro} int {name}(const double *x)",
        "{",
        "#ifdef __CUDA_ARCH__",
        f"{INDENT}return {branches}(x);",
        "#else",
    ]
    nan_tests = [f"x[{j}] != x[{j}]" for j, _ in layout if nan_possible[j]]
    if nan_tests:
        lines.append(f"{INDENT}if ({' || '.join(nan_tests)}) {{")
        lines.append(f"{INDENT * 2}return {branches}(x); /* NaN: the tree's own policy */")
        lines.append(f"{INDENT}}}")
    lines.append(f"{INDENT}{{")
    for position, (_, thresholds) in enumerate(layout):
        items = [_float_literal(t) for t in thresholds]
        items += [_FLOAT32_MAX_LITERAL] * (_padded_length(thresholds) - len(thresholds))
        lines += _array("float", f"t{position}", items)
    lines += _array(cell_type, "cell", [str(int(v)) for v in leaves], per_line=16)
    lines.append(f"{INDENT * 2}int k, index = 0;")
    strides = _strides(layout)
    for position, (feature, thresholds) in enumerate(layout):
        lines += _count_block(
            position, feature, thresholds, strides[position], nan_possible=nan_possible[feature]
        )
    lines.append(f"{INDENT * 2}return cell[index];")
    lines.append(f"{INDENT}}}")
    lines.append("#endif")
    lines.append("}")
    return lines
