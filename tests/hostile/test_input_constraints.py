"""Class 5 (run time): constraints on inputs only (``n2 <= n1``) restrict the input domain of
sampling, the optimization grid and the header's domain check, instead of failing after the
budget."""

from __future__ import annotations

import csv
from pathlib import Path

import cffi
import pytest

from tests.hostile.user import Folder, assert_clean, assert_refused, cli, store_rows

pytestmark = pytest.mark.integration

SECOND_INPUT = 'n2 = { type = "int", range = [16, 4096], log = true }\n'


def _is_valid(header: Path, workdir: Path) -> object:
    """``hostile_is_valid(n, n2, &config)`` of the generated header, through cffi."""
    ffi = cffi.FFI()
    ffi.cdef("int check(long long n, long long n2, long long block);")
    ffi.set_source(
        "_hostile_valid",
        f'#include "{header}"\n'
        "int check(long long n, long long n2, long long block)\n"
        "{ hostile_config c; c.block = block; return hostile_is_valid(n, n2, &c); }\n",
        libraries=["m"],
    )
    library = ffi.compile(tmpdir=str(workdir))
    import importlib.util

    spec = importlib.util.spec_from_file_location("_hostile_valid", library)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lib


DOMAINS = {
    '["n2 <= n"]': lambda n, n2: n2 <= n,
    '["n2 <= n", "block <= n2"]': lambda n, n2: n2 <= n,
    '["n * n2 <= 1000000", "block <= n"]': lambda n, n2: n * n2 <= 1_000_000,
}


@pytest.mark.parametrize("constraints", list(DOMAINS))
def test_constraints_on_inputs_only_restrict_the_input_domain(
    folder: Folder, constraints: str, tmp_path: Path
) -> None:
    config = folder.config(
        constraints=constraints, inputs_extra=SECOND_INPUT, grid="{ n = 8, n2 = 8 }", budget=60
    )
    out = folder.path / "run"
    assert_clean(cli("tune", config, "--out", out, cwd=folder.path))

    inside = DOMAINS[constraints]
    rows = store_rows(out)
    assert len(rows) == 60 and all(inside(r[1], r[2]) for r in rows)
    with open(out / "optima.csv") as handle:
        optima = list(csv.DictReader(handle))
    # 8 x 8 values (the input of "block <= ..." gains up to 4 where the valid blocks change),
    # fewer points
    n_values, n2_values = {p["n"] for p in optima}, {p["n2"] for p in optima}
    assert sorted([len(n_values), len(n2_values)])[0] <= 8
    assert len(n_values) <= 8 + 4 and len(n2_values) <= 8 + 4
    assert 0 < len(optima) < len(n_values) * len(n2_values)
    assert all(inside(float(p["n"]), float(p["n2"])) for p in optima)
    lib = _is_valid(out / "hostile.h", tmp_path)
    for n, n2 in ((1000, 100), (100, 1000), (4096, 4096), (64, 64), (16, 4096)):
        # outside the input domain a call is not valid, whatever the configuration
        assert lib.check(n, n2, 8) == int(inside(n, n2)), (n, n2)


def test_an_empty_input_domain_is_refused_before_measuring(folder: Folder) -> None:
    config = folder.config(constraints='["n2 < n", "n < n2"]', inputs_extra=SECOND_INPUT)
    out = folder.path / "run"
    assert_refused(cli("tune", config, "--out", out, cwd=folder.path), "n2 < n", "n < n2")
    assert not out.exists() and folder.calls == 0
