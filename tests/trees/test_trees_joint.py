"""JointSelector: leaves hold optimal, region-valid configurations; the regret tree; regions."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.codegen import (
    boundary_inputs,
    compile_check,
    example_call,
    render_header,
    verify_header,
)
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.trees import (
    JointSelector,
    PerParameterSelector,
    RegretOracle,
    TreeStructure,
    constraint_violations,
    predicted_regret,
)
from mlkaps_gpu.trees._regions import largest_at_most, leaf_boxes, probe_values
from mlkaps_gpu.trees._regret_tree import grow_regret_tree, merge_equal_leaves


def test_one_tree_whose_leaves_hold_complete_configurations(
    joint_selector: JointSelector, constrained: SimpleNamespace
) -> None:
    model = joint_selector.model_
    assert len(model.trees) == 1 and model.tree_names == ("joint",)
    assert all(output.tree == 0 for output in model.outputs)
    assert len(joint_selector.leaves_) >= model.trees[0].n_leaves  # merged leaves
    assert set(joint_selector.leaves_["source"]) <= {"leaf", "split", "pool", "repair"}
    assert "JointSelector(max_depth=6" in model.description


def test_leaf_configurations_are_optima_of_their_points(
    constrained: SimpleNamespace,
) -> None:
    space = constrained.space
    selector = JointSelector(max_depth=4).fit(
        constrained.optima, space.inputs, space.design, space=space, score=constrained.score
    )
    from_leaf = selector.leaves_["source"] == "leaf"
    assert from_leaf.mean() > 0.5
    chosen = selector.select(constrained.optima)
    key = space.design_names
    optimal = {tuple(row) for row in constrained.optima[key].itertuples(index=False)}
    assert {tuple(row) for row in chosen[key].itertuples(index=False)} <= optimal | set()


def test_joint_trees_are_valid_on_a_dense_grid(
    joint_selector: JointSelector,
    checked_selector: PerParameterSelector,
    constrained: SimpleNamespace,
) -> None:
    space = constrained.space
    dense = space.grid({"n": 100, "gpu": 2, "density": 100})
    assert constraint_violations(joint_selector, space, dense).n_invalid_trees == 0
    assert constraint_violations(checked_selector, space, dense).n_invalid_trees > 0


def test_joint_regret_falls_with_depth_to_zero(constrained: SimpleNamespace) -> None:
    space = constrained.space
    oracle = RegretOracle(constrained.optima, space, constrained.score)
    regrets = []
    for depth in (2, 4, 8):
        joint = JointSelector(max_depth=depth).fit(
            constrained.optima, space.inputs, space.design, space=space, oracle=oracle
        )
        regrets.append(predicted_regret(joint, oracle).mean)
    assert regrets[0] > regrets[1] > regrets[2] and regrets[2] < 1e-9


def test_validity_splits_keep_the_best_candidate(constrained: SimpleNamespace) -> None:
    """Where a leaf's best candidate is valid at its points but not on its whole region, the
    region is cut where it stops being valid rather than giving the leaf a worse one."""
    space = constrained.space
    selector = JointSelector(max_depth=5).fit(
        constrained.optima, space.inputs, space.design, space=space, score=constrained.score
    )
    assert "split" in set(selector.leaves_["source"])
    dense = space.grid({"n": 100, "gpu": 2, "density": 100})
    assert constraint_violations(selector, space, dense).n_invalid_trees == 0


@pytest.mark.parametrize("partition", ["regret", "regressor", "codes"])
def test_every_partition_gives_valid_leaves(partition: str, constrained: SimpleNamespace) -> None:
    space = constrained.space
    selector = JointSelector(max_depth=4, partition=partition).fit(
        constrained.optima, space.inputs, space.design, space=space, score=constrained.score
    )
    dense = space.grid({"n": 64, "gpu": 2, "density": 64})
    assert constraint_violations(selector, space, dense).n_invalid_trees == 0


def test_joint_needs_space_and_score(constrained: SimpleNamespace) -> None:
    space = constrained.space
    with pytest.raises(ValueError, match="space= .* score="):
        JointSelector().fit(constrained.optima, space.inputs, space.design)
    with pytest.raises(ValueError, match="partition"):
        JointSelector(partition="magic").fit(
            constrained.optima, space.inputs, space.design, space=space, score=constrained.score
        )


def test_joint_fit_is_deterministic(
    joint_selector: JointSelector, constrained: SimpleNamespace
) -> None:
    space = constrained.space
    again = JointSelector(max_depth=6).fit(
        constrained.optima, space.inputs, space.design, space=space, score=constrained.score
    )
    assert render_header(again, "j", provenance={"k": "v"}) == render_header(
        joint_selector, "j", provenance={"k": "v"}
    )


@pytest.mark.compiler
def test_joint_header_equals_select(joint_selector: JointSelector, tmp_path: Path) -> None:
    table = boundary_inputs(joint_selector, 20_000, np.random.default_rng(5))
    header = render_header(joint_selector, "joint")
    assert "joint_tree_select(" in header and "joint_joint_leaf(" in header
    report = verify_header(joint_selector, header, table, prefix="joint", workdir=tmp_path)
    assert report.ok, str(report)
    strict = ["g++", "-std=c++17", "-Wall", "-Wextra", "-pedantic", "-Werror"]
    body = example_call(joint_selector.model_, "joint")
    assert compile_check(header, strict, suffix=".cpp", body=body, workdir=tmp_path) == ""


def test_each_leaf_ranks_every_configuration_of_the_tree_its_own_first(
    joint_selector: JointSelector, constrained: SimpleNamespace
) -> None:
    model = joint_selector.model_
    ranking = model.ranking
    assert ranking is not None
    chosen = np.column_stack([output.codes for output in model.outputs])
    # the portfolio is the tree's distinct configurations; each leaf ranks its own first
    assert {tuple(row) for row in ranking.portfolio} == {tuple(row) for row in chosen}
    assert (ranking.portfolio[ranking.order[:, 0]] == chosen).all()
    # after it, the configurations of least mean predicted regret at the leaf's points
    leaf_of = model.trees[0].apply(model.features(constrained.optima))
    space, score = constrained.space, constrained.score
    leaf = int(np.bincount(leaf_of).argmax())
    points = constrained.optima[leaf_of == leaf]
    reference = score(points)
    means = []
    for index in ranking.order[leaf][1:]:
        table = space.assemble(
            points[space.input_names], np.tile(ranking.portfolio[index], (len(points), 1))
        )
        usable = space.is_valid(table)
        means.append(
            np.mean(score(table)[usable] / reference[usable] - 1) if usable.any() else 1e300
        )
    assert np.all(np.diff(means) >= -1e-12)


def test_ranked_answers_start_with_select_and_satisfy_the_constraints(
    joint_selector: JointSelector, constrained: SimpleNamespace
) -> None:
    model = joint_selector.model_
    table = boundary_inputs(joint_selector, 3000, np.random.default_rng(2))
    codes, counts = model.ranked_codes(table)
    assert (codes[:, 0] == model.select_codes(table)).all()
    assert counts.min() >= 1 and counts.max() <= len(model.ranking.portfolio) + 1
    assert counts.min() < counts.max()  # the constraints leave some out at some inputs
    space = constrained.space
    clamped = model.validity.clamped_inputs(table)
    for rank in range(1, codes.shape[1]):
        rows = np.flatnonzero(rank < counts)
        subset = {name: column[rows] for name, column in clamped.items()}
        assert model.validity.satisfied(subset, codes[rows, rank]).all()
        # no configuration twice in a row's ranking
        for earlier in range(rank):
            assert (codes[rows, rank] != codes[rows, earlier]).any(axis=1).all()
    assert space is not None


def test_per_parameter_trees_rank_nothing(checked_selector: PerParameterSelector) -> None:
    model = checked_selector.model_
    assert model.ranking is None
    with pytest.raises(ValueError, match="ranks no configurations"):
        model.ranked_codes(boundary_inputs(checked_selector, 10, np.random.default_rng(0)))
    assert "_ranked(" not in render_header(checked_selector, "pp")


@pytest.mark.compiler
def test_the_header_ranks_as_python_and_a_changed_ranking_is_caught(
    joint_selector: JointSelector, tmp_path: Path
) -> None:
    from mlkaps_gpu.codegen import CompiledHeader

    table = boundary_inputs(joint_selector, 5000, np.random.default_rng(7))
    header = render_header(joint_selector, "rk")
    model = joint_selector.model_
    frames, counts = CompiledHeader(joint_selector, header, prefix="rk").ranked(table)
    codes, expected = model.ranked_codes(table)
    assert (counts == expected).all()
    for rank, frame in enumerate(frames):
        rows = rank < counts
        for column, parameter in enumerate(model.design):
            values = parameter.domain_values()[codes[rows, rank, column]]
            assert (np.asarray(frame[parameter.name])[rows] == values).all()
    # swap the first two entries of leaf 0's ranking in the header only
    start = header.index("static const unsigned char order")
    row = header.index("{", header.index("= {", start) + 3)
    end = header.index("}", row)
    entries = header[row + 1 : end].split(", ")
    entries[1], entries[2] = entries[2], entries[1]
    changed = header[: row + 1] + ", ".join(entries) + header[end:]
    report = verify_header(joint_selector, changed, table, prefix="rk", workdir=tmp_path)
    assert not report.ok and report.mismatches["rk_ranked()"] > 0
    assert verify_header(joint_selector, header, table, prefix="rk", workdir=tmp_path).ok


# --------------------------------------------------------------------------- regret tree
def test_regret_tree_finds_the_separating_split() -> None:
    x = np.array([[1.0], [2.0], [3.0], [10.0], [11.0], [12.0]])
    # configuration 0 is best left of 6.5, configuration 1 right of it
    regret = np.array([[0, 1], [0, 1], [0, 1], [1, 0], [1, 0], [1, 0]], dtype=float)
    tree = grow_regret_tree(x, regret, max_depth=3)
    assert tree.n_leaves == 2 and tree.depth == 1
    assert tree.threshold[0] == 6.5 and tree.feature[0] == 0
    np.testing.assert_array_equal(tree.apply(x), [0, 0, 0, 1, 1, 1])


def test_regret_tree_thresholds_follow_float32_midpoints() -> None:
    x = np.array([[16777216.0], [16777220.0]])  # consecutive float32 values 2**24, 2**24 + 2
    tree = grow_regret_tree(x, np.array([[0.0, 1.0], [1.0, 0.0]]), max_depth=1)
    assert tree.threshold[0] == 16777218.0
    # 16777219 rounds to float32 16777220: it goes right, as in scikit-learn
    np.testing.assert_array_equal(tree.apply(np.array([[16777218.0], [16777219.0]])), [0, 1])


def test_regret_tree_respects_depth_and_min_samples_leaf() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((200, 2))
    regret = rng.random((200, 5))
    tree = grow_regret_tree(x, regret, max_depth=4, min_samples_leaf=10)
    assert tree.depth <= 4
    assert np.bincount(tree.apply(x)).min() >= 10


def test_merge_equal_leaves() -> None:
    leaf = -1
    tree = TreeStructure(
        children_left=[1, 2, leaf, leaf, leaf],
        children_right=[4, 3, leaf, leaf, leaf],
        feature=[0, 0, -2, -2, -2],
        threshold=[5.0, 2.0, -2.0, -2.0, -2.0],
        nan_goes_left=[True, False, False, False, False],
    )
    merged, codes = merge_equal_leaves(tree, np.array([[1, 2], [1, 2], [3, 4]]))
    assert merged.n_leaves == 2 and merged.threshold[0] == 5.0 and bool(merged.nan_goes_left[0])
    np.testing.assert_array_equal(codes, [[1, 2], [3, 4]])


# ------------------------------------------------------------------------------- regions
def test_largest_double_rounding_at_most_a_threshold() -> None:
    for threshold in (100.5, 0.25, 16777219.0, 1e-3, -7.75):
        bound = largest_at_most(threshold)
        assert float(np.float32(bound)) <= threshold
        assert float(np.float32(np.nextafter(bound, np.inf))) > threshold


def test_probe_values_hit_the_region_extremes() -> None:
    n = Parameter("n", "int", low=1, high=2**30, log=True)
    values = probe_values(n, 100.5, 16777219.0, interior=3)
    assert values is not None
    assert values[0] == 101 and values[-1] == 16777218  # 16777219 rounds up past the bound
    block = Parameter("block", "int", values=(8, 16, 32, 64))
    assert probe_values(block, 10.0, 40.0, interior=0) == [16, 32]
    gpu = Parameter("gpu", "categorical", values=("a", "b", "c"))
    assert probe_values(gpu, 0.5, np.inf, interior=0) == ["b", "c"]
    assert probe_values(n, 5000.5, 100.0, interior=2) is None


def test_leaf_boxes_bound_every_leaf(joint_selector: JointSelector) -> None:
    tree = joint_selector.model_.trees[0]
    lower, upper = leaf_boxes(tree, 3)
    table = boundary_inputs(joint_selector, 2000, np.random.default_rng(1))
    table = table[np.abs(table["density"]) < 3e38]  # finite after float32 rounding
    features = joint_selector.model_.features(table).astype(np.float32).astype(np.float64)
    leaves = tree.apply(features)
    assert np.all(features > lower[leaves]) and np.all(features <= upper[leaves])


def test_region_check_uses_region_extremes() -> None:
    """Optima at n = 40 (block 32) and n = 80 (block 64): the split between them lies at
    n = 60, so the right leaf's region starts at n = 61, where block 64 is invalid although it
    is valid at the leaf's own points: the leaf must get another configuration."""
    n = Parameter("n", "int", low=16, high=256)
    block = Parameter("block", "int", values=(16, 32, 64))
    space = Space([n], [block], ["block <= n"])
    optima = pd.DataFrame({"n": [16, 40, 80, 256], "block": [16, 32, 64, 64]})

    def score(table: pd.DataFrame) -> np.ndarray:
        return 1.0 / table["block"].to_numpy(dtype=float)  # larger blocks are better

    selector = JointSelector(max_depth=3).fit(optima, [n], [block], space=space, score=score)
    assert 60.0 in selector.model_.trees[0].threshold.tolist()
    assert set(selector.leaves_["source"]) & {"pool", "repair"}
    dense = pd.DataFrame({"n": np.arange(16, 257)})
    assert constraint_violations(selector, space, dense).n_invalid_trees == 0


def test_a_validity_split_over_two_inputs_keeps_the_best_candidate() -> None:
    """``nb <= min(m, n)``: a leaf of the points with m, n >= 256 whose best candidate is
    nb = 256 reaches down to the split between 203 and 256 on both inputs. No single cut makes
    nb = 256 valid there; one on m and then one on n do, and the leaf keeps it (before, it got
    the best candidate valid on the whole box, up to 1.5x slower)."""
    space = Space(
        [
            Parameter("m", "int", low=64, high=512, log=True),
            Parameter("n", "int", low=64, high=512, log=True),
        ],
        [Parameter("nb", "int", values=(8, 64, 256))],
        ["nb <= min(m, n)"],
    )

    def cost(table: pd.DataFrame) -> np.ndarray:
        small = np.minimum(table["m"], table["n"]).to_numpy() < 256
        nb = table["nb"].to_numpy()
        best = np.where(small, 8, 256)
        return table["m"].to_numpy() * table["n"].to_numpy() * (1.0 + 0.5 * (nb != best))

    axis = [64, 101, 161, 203, 256, 323, 406, 512]
    grid = pd.DataFrame([(m, n) for m in axis for n in axis], columns=["m", "n"])
    optima = _exhaustive(space, cost, grid)
    selector = JointSelector(max_depth=4).fit(
        optima, space.inputs, space.design, space=space, score=cost
    )
    chosen = selector.select(grid)
    assert (chosen["nb"].to_numpy() == optima["nb"].to_numpy()).all()
    assert "split" in set(selector.leaves_["source"])
    dense = space._cartesian_grid({"m": 80, "n": 80})
    assert constraint_violations(selector, space, dense).n_invalid_trees == 0


def _exhaustive(space: Space, cost, grid: pd.DataFrame) -> pd.DataFrame:
    from tests.trees.synthetic import exhaustive_optima

    return exhaustive_optima(space, cost, grid)
