"""experiments/benchkit/pytorch_trees.py: PyTorch's generated AutoHeuristic trees read as text
(never run) and scored on a truth, and their rows in bench_inputs.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.experiments._scripts import load_benchkit, load_script
from tests.experiments.test_bench_inputs import write_ah_file

trees = load_benchkit("pytorch_trees")
truth_module = load_benchkit("inputs_truth")
bench = load_script("bench_inputs")

CHOICE = "type=triton_BLOCK-M={}_BLOCK-K=32_BLOCK-N=64_numstages=3_numwarps=4"

# Written here in the generator's layout; the module-level raise shows it is never executed.
TREE = f"""
raise SystemExit("this file must be parsed, never run")
from torch._inductor.autoheuristic.learnedheuristic_interface import LearnedHeuristicDecision


class TinyA100(LearnedHeuristicDecision):
    def __init__(self) -> None:
        self.choices = []
        self.fill_choices()

    def check_precondition(self, metadata, context) -> bool:
        return (
            metadata.name == self.get_name()
            and metadata.shared_memory == 166912
            and str(metadata.device_capa) == "(8, 0)"
        )

    def get_confidence_threshold(self) -> float:
        return 0.5

    def get_choice(self, idx):
        if idx < len(self.choices):
            return self.choices[idx]
        return None

    def fill_choices(self) -> None:
        self.choices.append('{CHOICE.format(16)}')
        self.choices.append('{CHOICE.format(64)}')
        self.choices.append('{CHOICE.format(128)}')

    def get_name(self) -> str:
        return 'mixed_mm'

    def get_best_choices(self, context):
        if str(context.get_value('dt')) != 'torch.bfloat16':
            if context.get_value('m') <= 48.0:
                return [(0.9, 0), (0.1, 1)]
            else:
                if context.get_value('m*k') <= 300000.0:
                    return [(0.8, 2)]
                else:
                    return [(0.4, 1), (0.3, 0)]
        else:
            return None
"""


def tiny_truth() -> object:
    """Six shapes; the extern choice is index 0; BLOCK-M=128 is not listed at m = 64."""
    inputs = pd.DataFrame(
        {
            "m": [16, 32, 64, 128, 512, 128],
            "k": [1024] * 6,
            "dt": ["torch.float16"] * 5 + ["torch.bfloat16"],
        }
    )
    labels = ["extern_fallback_mixed_mm", CHOICE.format(16), CHOICE.format(64), CHOICE.format(128)]
    configs = pd.DataFrame({"kind": ["extern_fallback_mixed_mm"] + ["triton"] * 3})
    times = np.ones((6, 4))
    times[2, 3] = np.nan
    return truth_module.Truth("tiny", inputs, configs, labels, times, ["m", "k"], ["dt"])


def write_tree(path, text=TREE):
    path.write_text(text)
    return path


def test_reads_name_gpu_threshold_and_choices_without_running_the_file(tmp_path):
    tree = trees.read_learned_tree(write_tree(tmp_path / "_TinyA100.py"))
    assert (tree.class_name, tree.name) == ("TinyA100", "mixed_mm")
    assert (tree.shared_memory, tree.device_capa, tree.threshold) == (166912, (8, 0), 0.5)
    assert tree.choices == tuple(CHOICE.format(b) for b in (16, 64, 128))
    assert tree.matches({"name": "mixed_mm", "shared_memory": 166912, "device_capa": [8, 0]})
    assert not tree.matches({"name": "mixed_mm", "shared_memory": 232448, "device_capa": [9, 0]})
    assert not tree.matches({"name": "flex_attention", "shared_memory": 166912})


def test_answers_top_choice_where_sure_and_the_fallback_elsewhere(tmp_path):
    tree = trees.read_learned_tree(write_tree(tmp_path / "_TinyA100.py"))
    assert tree.features() == ["dt", "m", "m*k"]
    truth = tiny_truth()
    chosen, sure = trees.tree_answers(tree, truth, np.zeros(6, dtype=np.int64))
    # m 16, 32: BLOCK-M=16; m 64: 128 unlisted there -> fallback; m 128: 128;
    # m 512: top probability 0.4 <= the threshold -> fallback; bfloat16: None -> fallback
    assert chosen.tolist() == [1, 1, 0, 3, 0, 0]
    assert sure.tolist() == [True, True, False, True, False, False]
    unsure, _ = trees.tree_answers(tree, truth, None)
    assert unsure.tolist() == [1, 1, -1, 3, -1, -1]


def test_features_columns_buckets_intensity_and_formulas():
    inputs = pd.DataFrame({"m": [8, 16, 40], "k": [10, 20, 30], "n": [2, 4, 5]})
    assert trees.feature_values("1LEQmLEQ16", inputs).tolist() == [True, True, False]
    assert trees.feature_values("m*n", inputs).tolist() == [16, 64, 200]
    assert trees.feature_values("k/(m*n)", inputs).tolist() == pytest.approx(
        [10 / 16, 20 / 64, 0.15]
    )
    m, k, n = 8.0, 10.0, 2.0
    expected = m * k * n / (m * k + k * n + m * n)
    assert trees.feature_values("arith_intensity", inputs)[0] == pytest.approx(expected)
    with pytest.raises(trees.TreeFileError, match="'b\\*h'.*'b' is not a column"):
        trees.feature_values("b*h", inputs)
    with pytest.raises(trees.TreeFileError, match="not a column of the data"):
        trees.feature_values("needs padding", inputs)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("context.get_value('m') <= 48.0", "context.get_value('m') <= len('x')", "a comparison"),
        ("return None", "return choose(context)", "a return must be"),
        ("self.choices.append('" + CHOICE.format(64) + "')", "self.choices.extend(more)", "only"),
        ("class TinyA100(LearnedHeuristicDecision)", "class TinyA100(object)", "one class"),
    ],
)
def test_a_construct_the_generator_does_not_write_is_an_error_naming_the_line(
    tmp_path, old, new, message
):
    assert old in TREE
    head, _, tail = TREE.rpartition(old)  # the last one: get_best_choices' return None
    text = head + new + tail
    line = text[: text.index(new)].count("\n") + 1
    where = "" if message == "one class" else f"line {line}: .*"
    with pytest.raises(trees.TreeFileError, match=f"_Odd.py: {where}.*{message}"):
        trees.read_learned_tree(write_tree(tmp_path / "_Odd.py", text))


def test_bench_inputs_rows_of_a_shipped_tree_and_exit_2_for_one_it_cannot_score(tmp_path, capsys):
    data = write_ah_file(tmp_path / "tiny_gpu.txt.gz")  # metadata: mixed_mm, no GPU named
    any_gpu = TREE.replace("and metadata.shared_memory == 166912", "").replace(
        'and str(metadata.device_capa) == "(8, 0)"', ""
    )
    tree = write_tree(tmp_path / "_TinyAny.py", any_gpu)
    out = tmp_path / "results"
    argv = ["--data", str(data), "--quick", "--shares", "20", "--skip-project"]
    assert bench.main([*argv, "--out", str(out), "--pytorch-tree", str(tree)]) == 0
    frame = pd.read_csv(out / "bench_inputs_quick_tiny_gpu.csv", comment="#")
    shipped = frame[frame["tool"].str.startswith("PyTorch's shipped tree TinyA100")]
    assert len(shipped) == 2
    default = shipped[shipped["tool"].str.contains("Inductor's default")].iloc[0]
    autotuned = shipped[shipped["tool"].str.contains("autotuned")].iloc[0]
    assert 0 < default["geomean"] < autotuned["geomean"] <= 1
    assert "sure at" in (out / "bench_inputs_quick_tiny_gpu.md").read_text()

    flex = write_tree(tmp_path / "_Flex.py", any_gpu.replace("'mixed_mm'", "'flex_attention'"))
    with pytest.raises(SystemExit) as stop:
        bench.main([*argv, "--out", str(out), "--pytorch-tree", str(flex)])
    assert stop.value.code == 2
    padded = write_tree(tmp_path / "_Pad.py", any_gpu.replace("'m*k'", "'m_padded_length'"))
    with pytest.raises(SystemExit) as stop:
        bench.main([*argv, "--out", str(out), "--pytorch-tree", str(padded)])
    assert stop.value.code == 2
    assert "_Pad.py: feature 'm_padded_length'" in capsys.readouterr().err
    broken = write_tree(tmp_path / "_Broken.py", "def f(:\n")
    with pytest.raises(SystemExit) as stop:
        bench.main([*argv, "--out", str(out), "--pytorch-tree", str(broken)])
    assert stop.value.code == 2
