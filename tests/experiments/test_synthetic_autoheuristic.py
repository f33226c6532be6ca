"""experiments/synthetic_autoheuristic.py: the file it writes is an AutoHeuristic table the
project replays as it is, with Inductor's capped listing and failures where the model says."""

from __future__ import annotations

import numpy as np
import pytest

from mlkaps_gpu.campaign import load_config, prepare
from mlkaps_gpu.executors._autoheuristic import read_autoheuristic
from tests.experiments._scripts import load_script

synthetic = load_script("synthetic_autoheuristic")


def test_listing_caps_block_sizes_as_inductor_does():
    small = synthetic.listed(20, 8192, 8192)
    assert all(config[0] <= 32 for config in small)  # next power of two of 20, at least 16
    assert len(set(small)) == len(small) < len(synthetic.CONFIGS)
    assert synthetic.listed(8192, 8192, 8192) == synthetic.CONFIGS


def test_failures_are_the_configurations_over_the_shared_memory():
    for config in synthetic.CONFIGS:
        bm, bn, bk, stages, _ = config
        for dtype, size in synthetic.DTYPES.items():
            over = stages * (bm * bk + bk * bn) * size > synthetic.SHARED_MEMORY
            time = synthetic.triton_time(4096, 4096, 4096, size, config)
            assert np.isfinite(time) != over, (config, dtype)


def test_written_file_is_replayed_as_it_is(tmp_path):
    path = synthetic.write(tmp_path, count=40, seed=3)
    metadata, frame = read_autoheuristic(path)
    assert metadata["numerical_features"] == ["m", "n", "k"]
    cells = frame.groupby(["m", "n", "k", "dtype", "choice"]).size()
    assert (cells == 3).all()  # three repeats of every listed cell
    assert frame.groupby(["m", "n", "k", "dtype"]).ngroups == 40
    assert (frame.choice == synthetic.EXTERN).sum() == 40 * 3
    config = tmp_path / "synthetic.toml"
    config.write_text(
        '[campaign]\nname = "synthetic_mm"\n[kernel]\nexecutor = "replay"\n'
        'format = "autoheuristic"\nobjective = "time"\nfiles = "synthetic_mm.txt.gz"\n'
        '[objectives]\ntime = "minimize"\n[sampling]\nbudget = 50\n'
    )
    setup = prepare(load_config(config))
    try:
        assert setup.space.input_names == ["m", "n", "k", "dtype"]
        assert "kind" in setup.space.design_names  # extern_mm is a value of the choice kind
    finally:
        setup.executor.close()


def test_variants_add_alignment_inputs_and_list_a_random_share(tmp_path):
    """``alignment``: each size modulo 8 as an input (0 at most shapes); ``listed_share``:
    each shape lists that share of Inductor's configurations (at least one), extern always."""
    aligned = synthetic.write(tmp_path, count=30, seed=3, alignment=True)
    assert aligned.name == "synthetic_mm_align.txt.gz"
    metadata, frame = read_autoheuristic(aligned)
    assert metadata["numerical_features"] == ["m", "n", "k", "m_align", "n_align", "k_align"]
    assert (frame["k_align"] == frame["k"] % 8).all()
    full = read_autoheuristic(synthetic.write(tmp_path, count=30, seed=3))[1]
    half = synthetic.write(tmp_path, count=30, seed=3, listed_share=0.5)
    assert half.name == "synthetic_mm_listed50.txt.gz"
    part = read_autoheuristic(half)[1]
    shape = ["m", "n", "k", "dtype"]
    per_full = full.groupby(shape)["choice"].nunique()
    per_part = part.groupby(shape)["choice"].nunique()
    assert per_part.index.equals(per_full.index)
    triton = per_full - 1  # extern_mm is always listed
    assert ((per_part - 1) == np.maximum(1, np.round(0.5 * triton))).all()
    assert (part.choice == synthetic.EXTERN).sum() == 30 * 3


@pytest.mark.parametrize("argv", [["--shapes", "0"], ["--listed-share", "0"]])
def test_bad_arguments_exit_2(tmp_path, argv):
    with pytest.raises(SystemExit) as exc:
        synthetic.main(["--out", str(tmp_path), *argv])
    assert exc.value.code == 2
