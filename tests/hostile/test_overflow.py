"""Class 4: design spaces beyond 2**53 configurations, and grids whose (point, configuration)
keys exceed 2**62, are refused before anything is written or measured."""

from __future__ import annotations

import pytest

from tests.hostile.user import Folder, assert_refused, cli

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("design_extra", "fragment"),
    [
        ("".join(f"p{i} = {{ type = \"int\", values = [1, 2, 3, 4] }}\n" for i in range(27)),
         "2**53"),  # 6 x 4**27 = 1.6e17 configurations
        ("".join(f"q{i} = {{ type = \"int\", range = [1, 4096] }}\n" for i in range(6)),
         "2**53"),  # 6 x 4096**6, beyond int64 too
        ("".join(f"r{i} = {{ type = \"bool\" }}\n" for i in range(64)), "2**53"),
    ],
    ids=["4**27", "4096**6", "2**64"],
)  # fmt: skip
def test_huge_design_space_is_refused_up_front(
    folder: Folder, design_extra: str, fragment: str
) -> None:
    config = folder.config(design_extra=design_extra)
    out = folder.path / "run"
    result = cli("tune", config, "--out", out, cwd=folder.path)
    assert_refused(result, fragment, "fewer")
    assert not out.exists() and folder.calls == 0


def test_grid_beyond_int64_keys_is_refused_up_front(folder: Folder) -> None:
    design = "".join(f'p{i} = {{ type = "int", values = [1, 2, 3, 4] }}\n' for i in range(24))
    config = folder.config(
        design_extra=design,
        inputs_extra='m = { type = "int", range = [1, 100000] }\n',
        grid="{ n = 64, m = 10000 }",
    )
    out = folder.path / "run"
    result = cli("tune", config, "--out", out, cwd=folder.path)
    assert_refused(result, "[optimization] grid", "2**62", "coarser grid")
    assert not out.exists() and folder.calls == 0
