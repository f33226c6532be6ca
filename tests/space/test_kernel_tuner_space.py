"""Kernel Tuner search spaces imported as design spaces: the valid set equals Kernel Tuner's."""

from __future__ import annotations

import pytest

from mlkaps_gpu.space import Space, SpaceError
from mlkaps_gpu.space._kernel_tuner import translate_restriction

#: Kernel Tuner's convolution example (benchmark_hub convolution_milo): 4,362 valid configurations.
TUNE_PARAMS = {
    "block_size_x": [16 * i for i in range(1, 17)],
    "block_size_y": [1, 2, 4, 8, 16],
    "tile_size_x": [1, 2, 3, 4],
    "tile_size_y": [1, 2, 3, 4],
    "read_only": [0, 1],
    "use_padding": [0, 1],
    "use_shmem": [0, 1],
    "use_cmem": [1],
    "filter_height": [15],
    "filter_width": [15],
}
RESTRICTIONS = [
    "use_padding==0 or block_size_x % 32 != 0",
    "block_size_x*block_size_y<=1024",
    "use_padding==0 or use_shmem != 0",
    "use_shmem == 0 or ((block_size_x*tile_size_x+(filter_width-1))"
    "*(block_size_y*tile_size_y+(filter_height-1))) < 12*1024",
]


def valid_configurations(space: Space) -> set[tuple[object, ...]]:
    values = [p.domain_values().tolist() for p in space.design]
    return {
        tuple(values[j][code] for j, code in enumerate(row)) for row in space.valid_design_codes({})
    }


@pytest.mark.parametrize(
    ("tune_params", "restrictions", "max_threads"),
    [
        (TUNE_PARAMS, RESTRICTIONS, 1024),
        (TUNE_PARAMS, RESTRICTIONS, 256),
        (
            {"block_size_x": [32, 64, 128, 256], "unroll": [1, 2, 4], "variant": ["a", "b"]},
            ["unroll in [1, 4] or variant == 'b'", "block_size_x * unroll not in (128, 512)"],
            1024,
        ),
    ],
)
def test_valid_configurations_equal_kernel_tuners_own(tune_params, restrictions, max_threads):
    searchspace = pytest.importorskip("kernel_tuner.searchspace")
    expected = set(map(tuple, searchspace.Searchspace(tune_params, restrictions, max_threads).list))
    space = Space.from_kernel_tuner(tune_params, restrictions, max_threads=max_threads)
    assert valid_configurations(space) == expected
    assert [p.name for p in space.design] == list(tune_params)


def test_python_forms_are_translated_and_the_rest_refused() -> None:
    assert translate_restriction("x in [1, 2]") == "x == 1 or x == 2"
    assert translate_restriction("x not in (3,)") == "x != 3"
    assert translate_restriction("flag == True") == "flag == 1"
    with pytest.raises(SpaceError, match=r"restrictions\[0\].*__import__"):
        Space.from_kernel_tuner({"a": [1, 2]}, ["__import__('os').system('true') or a > 0"])
    with pytest.raises(SpaceError, match="callable"):
        Space.from_kernel_tuner({"a": [1, 2]}, lambda p: p["a"] > 1)
    with pytest.raises(SpaceError, match=r"restrictions\[1\].*not an expression string"):
        Space.from_kernel_tuner({"a": [1, 2]}, ["a > 0", lambda p: True])
    with pytest.raises(SpaceError, match=r"restrictions\[0\]"):
        Space.from_kernel_tuner({"a": [1, 2]}, ["a in range(3)"])
    with pytest.raises(SpaceError, match="all ints"):
        Space.from_kernel_tuner({"a": [1, "x"]})
