"""experiments/synthetic_replay.py: the caches and config it writes are a replay the project
reads, and its restrictions mean one thing in the generator and in the config's constraints."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import load_config, prepare
from tests.experiments._scripts import load_script

synthetic = load_script("synthetic_replay")

#: The generator's parameters with two values each (the full space takes half a minute).
SMALL = {
    name: values[:2] if name != "MDIMC" else [8, 32]
    for name, values in synthetic.PARAMETERS.items()
}


@pytest.mark.parametrize("constraints", [True, False])
def test_written_replay_is_read_and_its_constraints_match_the_data(tmp_path, constraints):
    path = synthetic.write(tmp_path, constraints=constraints, parameters=SMALL)
    setup = prepare(load_config(path))
    try:
        space = setup.space.with_allowed_designs(*setup.executor.known_designs())
        assert setup.space.input_names == ["gpu"]
        assert setup.space.design_names == list(SMALL)
        # the config's constraints leave exactly the configurations the data hold
        assert space.allowed_designs_restrict() is (not constraints)
        valid = synthetic.valid_configurations(SMALL)
        assert 0 < len(valid) < np.prod([len(v) for v in SMALL.values()])
        optimum, _ = setup.executor.optimum("G3")
        assert optimum == pytest.approx(synthetic.times(valid, 2).min())
    finally:
        setup.executor.close()


def test_failures_lie_beside_the_optimum_and_are_read_as_failures(tmp_path):
    path = synthetic.write(tmp_path, parameters=SMALL, failures=True)
    assert path.name == "synthetic_gemm_failures.toml"
    valid = synthetic.valid_configurations(SMALL)
    times = synthetic.times(valid, 0, failures=True)
    failed = ~np.isfinite(times)
    assert 0.1 < failed.mean() < 0.5
    # the fastest configuration uses the most resources that do not fail
    use = synthetic.resource(valid)
    assert use[np.nanargmin(times)] == use[~failed].max()
    setup = prepare(load_config(path))
    try:
        optimum, _ = setup.executor.optimum("G1")
        assert optimum == pytest.approx(np.nanmin(times))
        rows = setup.space.assemble(
            pd.DataFrame({"gpu": ["G1"] * int(failed.sum())}),
            setup.space.design_codes(pd.DataFrame(valid[failed].astype(int), columns=list(SMALL))),
        )
        result = setup.executor.run(rows)
        assert (result["status"] != "ok").all()
    finally:
        setup.executor.close()
