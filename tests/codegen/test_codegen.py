"""Header text: golden file, naming rules, threshold printing, determinism (no compiler)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.codegen import NamePlan, render_header, render_model_header, validate_prefix
from mlkaps_gpu.codegen._codegen_table import (
    MIN_LEAVES,
    TABLE_LIMIT,
    cell_leaves,
    float32_thresholds,
    table_layout,
)
from mlkaps_gpu.space._parameters import Parameter
from mlkaps_gpu.trees import DecisionModel, PerParameterSelector, TreeStructure

GOLDEN = Path(__file__).parent / "golden" / "tiny_selector.h"
FIXED_VERSIONS = {"mlkaps_gpu": "0.0.test", "scikit-learn": "x.y", "numpy": "x.y"}


def tiny_header(model: DecisionModel) -> str:
    return render_model_header(
        model, prefix="tiny", versions=FIXED_VERSIONS, provenance={"sample_hash": "0123abcd"}
    )


def test_golden_header(tiny_model: DecisionModel) -> None:
    text = tiny_header(tiny_model)
    # Regenerate on purpose only: MLKAPS_REGENERATE_GOLDEN=1 pytest tests/trees, then review.
    if os.environ.get("MLKAPS_REGENERATE_GOLDEN") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_tiny_model_python_answers(tiny_model: DecisionModel) -> None:
    table = pd.DataFrame(
        {
            "size": [100, 101, 101, 101, 16777218, 16777219, 16777220],
            "dtype": ["fp32", "fp-64", "fp32", "fp32", "fp32", "fp32", "fp32"],
            "load": [0.05, 0.25, np.nan, 0.2500001, 0.5, 0.5, 0.5],
        }
    )
    chosen = tiny_model.predict(table)
    assert chosen["tile"].tolist() == [16, 32, 32, 64, 64, 64, 64]
    assert chosen["algo"].tolist() == ["panel-recursive", "tiled"] + ["panel-recursive"] * 5
    assert chosen["fused"].tolist() == [True] * 7
    # NaN load goes right at 'load <= 0.1' (nan_goes_left is false there). 16777219 rounds to
    # float32 16777220 (ties to even), so it is *not* <= 16777219.0, unlike in double.
    assert chosen["ratio"].tolist() == [0.0, 0.75, 0.75, 0.75, 0.75, 1.0, 1.0]


@pytest.mark.parametrize(
    "prefix", ["", "1abc", "a-b", "a b", "größe", "int", "switch", "x;y", "_private", "pow", "main"]
)
def test_bad_prefix_rejected(selector: PerParameterSelector, prefix: str) -> None:
    with pytest.raises(ValueError, match="prefix"):
        render_header(selector, prefix)


@pytest.mark.parametrize("prefix", ["mlkaps", "Tuner2", "a"])
def test_good_prefix_accepted(prefix: str) -> None:
    assert validate_prefix(prefix) == prefix


def test_names_are_sanitised_and_unique() -> None:
    inputs = [
        Parameter("x", "int", low=0, high=10),  # clashes with the select function's local
        Parameter("double", "float", low=0.0, high=1.0),  # a C keyword
        Parameter("größe", "categorical", values=("a-b", "a_b", "A.B", "7up")),
    ]
    design = [
        Parameter("class", "categorical", values=("panel-recursive", "x", "X")),
        Parameter("tiny_select", "int", values=(1, 2)),  # clashes with nothing: own field
    ]
    plan = NamePlan.build("tiny", inputs, design, [p.name for p in design])
    assert [i.argument for i in plan.inputs] == ["x", "double_", "gr__e"]
    assert plan.locals == ("config", "x_2", "leaf")
    assert plan.inputs[2].enum_constants == (
        "TINY_GR__E_A_B",
        "TINY_GR__E_A_B_2",
        "TINY_GR__E_A_B_3",
        "TINY_GR__E_7UP",
    )
    assert plan.outputs[0].field == "class_"
    assert plan.outputs[0].enum_constants == (
        "TINY_CLASS_PANEL_RECURSIVE",
        "TINY_CLASS_X",
        "TINY_CLASS_X_2",
    )
    names = list(plan.all_file_scope())
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) for name in names)
    assert all(name.lower().startswith("tiny") for name in names)


def test_header_structure(selector: PerParameterSelector) -> None:
    text = render_header(selector, "mlkaps", provenance={"sample_hash": "abc123", "bad": "a */ b"})
    assert text.startswith("/*\n")
    assert " * sample_hash: abc123\n" in text
    assert "a * / b" in text  # a provenance value cannot close the comment early
    assert "#ifndef MLKAPS_SELECTOR_H_INCLUDED\n#define MLKAPS_SELECTOR_H_INCLUDED\n" in text
    assert "#define MLKAPS_HD __host__ __device__\n#else\n#define MLKAPS_HD\n#endif" in text
    assert "MLKAPS_ALGO_PANEL_RECURSIVE = 1" in text
    assert "static inline MLKAPS_HD mlkaps_config mlkaps_select(long long n, mlkaps_gpu_t gpu)" in (
        text
    )
    for field in (
        "long long block;",
        "mlkaps_algo_t algo;",
        "int use_shared;",
        "long long unroll;",
    ):
        assert f"    {field}\n" in text
    functions = re.findall(r"^static inline (\w+) ", text, flags=re.MULTILINE)
    assert functions and set(functions) == {"MLKAPS_HD"}
    assert re.findall(r"^(?!static inline|#|typedef)\w.*\(", text, flags=re.MULTILINE) == []
    assert "main" not in re.findall(r"\w+", text)
    assert "%" not in text
    # no compound literals, no designated initialisers; brace initialisers only for the
    # constant lookup arrays (plain C89 aggregate initialisation)
    braces = re.findall(r"^.*= \{.*$", text, flags=re.MULTILINE)
    assert all(re.fullmatch(r"\s+static const [\w ]+ \w+\[\d+\] = \{", line) for line in braces)
    assert re.search(r"\)\s*\{[^\n]*[.\[]\w*\]?\s*=", text) is None


def test_thresholds_are_exact_and_only_less_equal(selector: PerParameterSelector) -> None:
    text = render_header(selector, "mlkaps")
    tests = re.findall(r"if \((x\[.*)\) \{", text)
    assert tests
    printed = set()
    for test in tests:
        match = re.fullmatch(r"x\[(\d+)\] <= (\S+)", test)
        assert match, test
        printed.add((int(match.group(1)), float(match.group(2))))
    expected = set()
    for estimator in selector.trees_.values():
        split = estimator.tree_.children_left != -1
        for feature, threshold in zip(
            estimator.tree_.feature[split], estimator.tree_.threshold[split], strict=True
        ):
            expected.add((int(feature), float(threshold)))  # float(text) == threshold exactly
    assert printed == expected
    loops = re.compile(r"for \(k = 0; k < \d+; \+\+k\)")  # the lookup's counting loops
    assert not re.search(r"[^<]<[^=<]", loops.sub("", text.replace("#include", "")))


def test_nan_clause_only_for_float_inputs(density_selector: PerParameterSelector) -> None:
    text = render_header(density_selector, "mlkaps")
    clauses = re.findall(r"\|\| x\[(\d+)\] != x\[(\d+)\]", text)
    assert clauses, "some density split should send NaN left"
    assert {(int(a), int(b)) for a, b in clauses} == {(2, 2)}
    assert "double density" in text


def test_same_fit_same_text(selector: PerParameterSelector, optima: pd.DataFrame) -> None:
    text = render_header(selector, "mlkaps", provenance={"sample_hash": "abc"})
    assert render_header(selector, "mlkaps", provenance={"sample_hash": "abc"}) == text
    refit = PerParameterSelector(max_depth=8).fit(optima, selector.inputs_, selector.design_)
    assert render_header(refit, "mlkaps", provenance={"sample_hash": "abc"}) == text


def _comb_tree(n_splits: int, thresholds: list[float] | None = None) -> TreeStructure:
    """Node 2i tests feature i % 2 at threshold i + 0.5; its left child is a leaf."""
    left, right, feature, threshold = [], [], [], []
    for i in range(n_splits):
        node = len(left)
        leaf = node + 1
        nxt = node + 2
        left += [leaf, -1]
        right += [nxt, -1]
        feature += [i % 2, -2]
        threshold += [thresholds[i] if thresholds else i + 0.5, -2.0]
    left.append(-1)
    right.append(-1)
    feature.append(-2)
    threshold.append(-2.0)
    return TreeStructure(
        children_left=left,
        children_right=right,
        feature=feature,
        threshold=threshold,
        nan_goes_left=[False] * len(left),
    )


def test_lookup_table_cells_match_the_tree() -> None:
    tree = _comb_tree(40)
    layout = table_layout(tree, 2)
    assert layout is not None and [len(t) for _, t in layout] == [20, 20]
    leaves = cell_leaves(tree, layout, 2).reshape(21, 21)
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 42, size=(2000, 2)).astype(np.float32).astype(np.float64)
    counts = [np.searchsorted(t.astype(np.float64), x[:, j], side="left") for j, t in layout]
    node_leaf = tree.apply(x).tolist()
    assert leaves[counts[0], counts[1]].tolist() == node_leaf


def test_thresholds_round_down_to_float32() -> None:
    tree = _comb_tree(2, [16777218.5, 0.1])
    t0 = float32_thresholds(tree, 0)
    t1 = float32_thresholds(tree, 1)
    # the largest float32 not above each threshold: x32 <= t  <=>  x32 <= t32
    assert t0.tolist() == [16777218.0] and t0.dtype == np.float32
    assert float(t1[0]) <= 0.1 < float(np.nextafter(t1[0], np.float32(1)))


def test_large_and_small_trees_keep_the_nested_ifs(tiny_model: DecisionModel) -> None:
    assert table_layout(_comb_tree(200), 2) is None  # 101 x 101 cells > TABLE_LIMIT
    assert TABLE_LIMIT < 101 * 101
    assert table_layout(_comb_tree(MIN_LEAVES - 2), 2) is None  # MIN_LEAVES - 1 leaves
    assert table_layout(_comb_tree(MIN_LEAVES - 1), 2) is not None
    assert "count +=" not in tiny_header(tiny_model)  # 3 leaves at most


def test_lookup_header_keeps_nested_ifs_for_nan_and_device(
    density_selector: PerParameterSelector,
) -> None:
    header = render_header(density_selector, "dens")
    assert "count += v > t" in header
    assert "_leaf_branches(x); /* NaN: the tree's own policy */" in header
    assert header.count("#ifdef __CUDA_ARCH__") >= 2
    assert "count +=" not in render_header(density_selector, "dens", lookup=False)
