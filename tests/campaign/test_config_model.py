"""The configuration model: defaults, strict types, bounds, names, LightGBM parameters, executor
keys, the generated reference and every TOML block of the documentation."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import CampaignConfig, ConfigError, load_config, parse_config, prepare
from mlkaps_gpu.cli._main import main
from mlkaps_gpu.executors import EXECUTOR_SETTINGS

ROOT = Path(__file__).resolve().parents[2]

MINIMAL = """\
[kernel]
executor = "python"
function = "math:hypot"

[inputs]
n = { type = "int", range = [16, 1024] }

[design]
block = { type = "int", values = [8, 16, 32] }
"""


def _parse(text: str, folder: Path | None = None):
    folder = folder or Path.cwd()
    return parse_config(text, path=folder / "x.toml", label="x.toml")


def _refusal(text: str, folder: Path | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        _parse(text, folder)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("x.toml: "), message
    return message


def test_defaults_are_the_documented_ones() -> None:
    config = _parse(MINIMAL + "[sampling]\nbudget = 500\n")
    assert (config.name, config.seed) == ("x", 0)
    assert config.objectives == {"time": "minimize"}
    kernel = config.kernel
    assert (kernel.measure, kernel.repeats, kernel.warmup) == (False, 1, 0)
    assert (kernel.timeout, kernel.memory_limit) == (60.0, None)
    replay = EXECUTOR_SETTINGS["replay"].model_fields  # each executor has its own model
    assert (replay["format"].default, replay["objective"].default) == ("kernel_tuner", "time")
    assert (
        EXECUTOR_SETTINGS["cffi"].model_fields["options"].get_default(call_default_factory=True)
        == {}
    )
    sampling = config.sampling
    assert (sampling.method, sampling.budget, sampling.batch_size) == ("ga_adaptive", 500, 25)
    # the bootstrap share is resolved per campaign: 0.2 or 0.05 (decision 0030)
    assert (sampling.bootstrap, sampling.eps_initial, sampling.eps_final) == (None, 1.0, 1.0)
    assert sampling.confirm == 0.1
    assert (sampling.sub_sampler, sampling.fixed) == ("lhs", {})
    surrogate = config.surrogate
    assert (surrogate.n_estimators, surrogate.log_target, surrogate.params) == (300, True, {})
    optimization = config.optimization
    assert (optimization.grid, optimization.method) == (16, "auto")
    assert (optimization.population, optimization.generations, optimization.window) == (40, 40, 10)
    assert (optimization.weights, optimization.bounds, optimization.prefer_measured) == (
        None,
        {},
        True,
    )
    trees = config.trees
    assert (trees.mode, trees.max_depth, trees.depth_tolerance) == ("joint", "auto", 0.01)
    assert (trees.prefix, trees.verify_inputs) == ("mlkaps", 10_000)
    execution = config.execution
    assert (execution.backend, execution.cluster, execution.scheduler) == ("local", "local", None)
    assert (execution.workers, execution.in_flight, execution.options) == (1, 2, {})
    assert (config.transfer.sources, config.transfer.warm_start) == ([], 0.2)


def test_batch_size_defaults_to_five_percent_of_the_budget() -> None:
    assert _parse(MINIMAL + "[sampling]\nbudget = 12\n").sampling.batch_size == 1
    assert _parse(MINIMAL + "[sampling]\nbudget = 1000\n").sampling.batch_size == 50
    assert _parse(MINIMAL + "[sampling]\nbudget = 130\n").sampling.batch_size == 6
    given = _parse(MINIMAL + "[sampling]\nbudget = 12\nbatch_size = 30\n").sampling
    assert given.batch_size == 30


@pytest.mark.parametrize(
    ("section", "line", "fragment"),
    [
        ("sampling", "budget = 1e3", "[sampling] budget: 1000.0: must be an integer"),
        ("sampling", 'budget = "10"', '[sampling] budget: "10": must be an integer'),
        ("sampling", "budget = true", "[sampling] budget: true: must be an integer"),
        ("surrogate", 'log_target = "no"', '[surrogate] log_target: "no": must be true or false'),
        ("surrogate", "log_target = 1", "[surrogate] log_target: 1: must be true or false"),
        ("optimization", "prefer_measured = 0", "[optimization] prefer_measured: 0: must be true"),
        ("trees", "max_depth = 4.0", "[trees] max_depth: 4.0: must be an integer from 1 to 32"),
        ("trees", "depth_tolerance = inf", "[trees] depth_tolerance: inf: must be a finite"),
        ("sampling", "bootstrap = nan", "[sampling] bootstrap"),
        ("campaign", 'seed = "0"', '[campaign] seed: "0": must be an integer'),
        ("optimization", "weights = [1, nan]", "[optimization] weights[1]: nan"),
    ],
)
def test_no_coercion(section: str, line: str, fragment: str) -> None:
    message = _refusal(MINIMAL + f"[{section}]\n{line}\n")
    assert fragment in message, message


def test_a_number_key_accepts_an_integer() -> None:
    assert _parse(MINIMAL + "[trees]\ndepth_tolerance = 0\n").trees.depth_tolerance == 0


BOUNDS = [
    ("sampling", "budget", 10_000_000),
    ("sampling", "batch_size", 100_000),
    ("surrogate", "n_estimators", 100_000),
    ("optimization", "population", 100_000),
    ("optimization", "generations", 100_000),
    ("optimization", "window", 100_000),
    ("optimization", "grid", 10_000),
    ("trees", "max_depth", 32),
    ("trees", "verify_inputs", 10_000_000),
    ("campaign", "seed", 2**31 - 1),
]


@pytest.mark.parametrize(("section", "key", "maximum"), BOUNDS)
def test_documented_upper_bounds(section: str, key: str, maximum: int) -> None:
    _parse(MINIMAL + f"[{section}]\n{key} = {maximum}\n")
    message = _refusal(MINIMAL + f"[{section}]\n{key} = {maximum + 1}\n")
    assert f"[{section}] {key}: {maximum + 1}: must be an integer" in message
    assert str(maximum) in message
    assert str(maximum) in (ROOT / "docs" / "config.md").read_text()


@pytest.mark.parametrize(("key", "maximum"), [("repeats", 10_000), ("warmup", 10_000)])
def test_kernel_bounds(key: str, maximum: int) -> None:
    _parse(MINIMAL.replace("function =", f"{key} = {maximum}\nfunction ="))
    message = _refusal(MINIMAL.replace("function =", f"{key} = {maximum + 1}\nfunction ="))
    assert f"[kernel] {key}: {maximum + 1}: must be an integer" in message


def test_execution_bounds() -> None:
    base = MINIMAL + '[execution]\nbackend = "dask"\n'
    _parse(base + "workers = 10000\nin_flight = 1000\n")
    assert "[execution] workers: 10001" in _refusal(base + "workers = 10001\n")
    assert "[execution] in_flight: 1001" in _refusal(base + "in_flight = 1001\n")


def test_total_grid_points_are_bounded() -> None:
    two = MINIMAL.replace("[design]", '[inputs.m]\ntype = "float"\nrange = [0.0, 1.0]\n\n[design]')
    _parse(two + "[optimization]\ngrid = { n = 1000, m = 1000 }\n")
    message = _refusal(two + "[optimization]\ngrid = { n = 1009, m = 1000 }\n")
    assert "[optimization] grid" in message and "1009000 grid points" in message


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("int", "keyword"),
        ("class", "keyword"),
        ("pow", "math.h"),
        ("floorf", "math.h"),
        ("y0", "math.h"),
        ("FP_NAN", "macro"),
        ("EOF", "macro"),
        ("blockDim", "CUDA"),
        ("main", "entry point"),
        ("_x", "starts with '_'"),
        ("x__y", "'__'"),
        ("1x", "not a C identifier"),
        ("x" * 64, "64 characters"),
        ("id", "store's own column"),
        ("Timestamp", "store's own column"),
        ("MESSAGE", "store's own column"),
        ("ｘ", "NFKC"),
        ("é", "non-ASCII"),
    ],
)
def test_parameter_name_rules(name: str, fragment: str) -> None:
    text = MINIMAL.replace("n = {", f'"{name}" = {{')
    message = _refusal(text)
    assert f"[inputs] {name}: " in message and fragment in message, message


def test_objective_and_parameter_names_differ_ignoring_case() -> None:
    message = _refusal(MINIMAL + '[objectives]\nN = "minimize"\n')
    assert "[objectives] N" in message and "'n' and 'N'" in message


@pytest.mark.parametrize("prefix", ["int", "main", "pow", "_p", "NAN", "a-b", "größe"])
def test_prefix_rules(prefix: str) -> None:
    message = _refusal(MINIMAL + f'[trees]\nprefix = "{prefix}"\n')
    assert "[trees] prefix" in message and "header prefix" in message


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ("{ num_leafs = 8 }", "params.num_leafs: 8: not a LightGBM parameter"),
        ("{ num_leaves = 8, max_leaves = 9 }", "params.max_leaves: 9: sets 'num_leaves' again"),
        ("{ seed = 1 }", "params.seed: 1: set by the tool"),
        ("{ nthreads = 2 }", "params.nthreads: 2: set by the tool"),
        ("{ num_boost_round = 2 }", "set by the tool: use [surrogate] n_estimators"),
        ('{ objective = "binary" }', 'params.objective: "binary": must be one of'),
        ("{ learning_rate = -1 }", "params.learning_rate: -1"),
        ("{ feature_fraction = 2.0 }", "params.feature_fraction: 2.0"),
        ("{ num_leaves = 1.5 }", "params.num_leaves: 1.5: must be an integer"),
        ("{ lambda_l2 = nan }", "params.lambda_l2: nan"),
        ('{ output_model = "m.txt" }', "a file, command-line or network parameter"),
        ('{ boosting = "rf" }', "refused by LightGBM"),
        ("{ extra_trees = 3 }", "refused by LightGBM"),
    ],
)
def test_lightgbm_parameters(params: str, fragment: str) -> None:
    message = _refusal(MINIMAL + f"[surrogate]\nparams = {params}\n")
    assert "[surrogate] params" in message and fragment in message, message


def test_lightgbm_aliases_and_good_values_are_accepted() -> None:
    params = "{ min_child_samples = 5, reg_lambda = 0.5, subsample = 0.8, subsample_freq = 1 }"
    config = _parse(MINIMAL + f"[surrogate]\nparams = {params}\n")
    assert config.surrogate.params["reg_lambda"] == 0.5


@pytest.mark.parametrize(
    ("function_line", "fragment"),
    [
        ("", "[kernel] function: missing"),
        ('function = "math:hypot"\nfiles = "x.json"', '[kernel] files: "x.json": not read by'),
        ('function = "math:hypot"\nbuiltin = "lu"', "[kernel] builtin"),
        ('function = "math:hypot"\ninvalid_exit_codes = [3]', "[kernel] invalid_exit_codes"),
        ('function = "hypot"', "[kernel] function: \"hypot\": must be 'module:function'"),
    ],
)
def test_each_executor_reads_only_its_keys(function_line: str, fragment: str) -> None:
    message = _refusal(MINIMAL.replace('function = "math:hypot"', function_line))
    assert fragment in message, message


def test_builtin_kernels_are_checked_at_load() -> None:
    cffi = '[kernel]\nexecutor = "cffi"\nbuiltin = "{name}"\n'
    assert "unknown kernel" in _refusal(cffi.format(name="nope"))
    message = _refusal(cffi.format(name="gemm_cuda"))
    assert '[kernel] builtin: "gemm_cuda": a CUDA kernel: use executor = "cupy"' in message
    message = _refusal(cffi.format(name="lu") + "[optimization]\ngrid = { q = 4 }\n")
    assert "[optimization] grid.q: 4: not an input (inputs: m, n)" in message


TWO_OBJECTIVES = '[objectives]\ntime = "minimize"\nenergy = "minimize"\n'


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (
            '[sampling]\nmethod = "lhs"\neps_final = 0.5\n',
            "[sampling] eps_final: 0.5: applies only",
        ),
        ('[execution]\nscheduler = "tcp://h:1"\n', "[execution] scheduler"),
        ("[transfer]\nwarm_start = 0.5\n", "[transfer] warm_start: 0.5: applies only"),
        ("[optimization]\nweights = [1.0]\n", "[optimization] weights: [1.0]: applies only"),
        (
            TWO_OBJECTIVES + "[optimization]\nweights = [1.0]\n",
            "[optimization] weights: [1.0]: needs one weight per objective",
        ),
        (
            TWO_OBJECTIVES + "[optimization]\nbounds = { x = 1 }\n",
            "[optimization] bounds",
        ),
        ("[trees]\nmax_depth = 6\ndepth_tolerance = 0.02\n", "[trees] depth_tolerance"),
        ("[sampling.fixed]\nm = 3\n", "[sampling] fixed"),
        ("[kernel.options]\nx = 1\n", "[kernel] options"),
    ],
)
def test_ignored_or_misread_settings_are_errors(extra: str, fragment: str) -> None:
    message = _refusal(MINIMAL + extra)
    assert fragment in message, message


def test_constraint_errors_name_the_key() -> None:
    base = MINIMAL + "constraints = [CONSTRAINT]\n"
    for constraint, fragment in [
        ('"block < m"', "unknown parameter 'm'"),
        ('"block < 1e999"', "not a finite C double"),
        ('"block <"', "syntax error"),
        ('"__import__(1)"', "__import__"),
    ]:
        message = _refusal(base.replace("CONSTRAINT", constraint))
        assert "[design] constraints[0]" in message and fragment in message, message


def test_replay_design_parameters_are_refused() -> None:
    text = '[kernel]\nexecutor = "replay"\nfiles = "/nonexistent.json"\n'
    assert "[kernel] files" in _refusal(text) and "not found" in _refusal(text)


def test_command_executor_is_reachable_from_toml(tmp_path: Path) -> None:
    script = tmp_path / "bench.py"
    script.write_text("import sys\nprint(int(sys.argv[1]) / int(sys.argv[2]))\n")
    text = MINIMAL.replace(
        'executor = "python"\nfunction = "math:hypot"',
        f'executor = "command"\ncommand = ["{sys.executable}", "bench.py", "{{n}}", "{{block}}"]\n'
        "repeats = 2\ntimeout = 30\ninvalid_exit_codes = [3]",
    )
    config = _parse(text, tmp_path)
    assert config.kernel.cwd == str(tmp_path)
    setup = prepare(config)
    rows = pd.DataFrame({"n": np.array([64, 128]), "block": np.array([8, 32])})
    result = setup.executor.run(rows)
    assert result["status"].tolist() == ["ok", "ok"]
    assert result["time"].tolist() == [8.0, 4.0]
    assert result["n_repeats"].tolist() == [2, 2]


def test_check_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.toml"
    good.write_text(MINIMAL)
    assert main(["check", str(good)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("OK good.toml: campaign 'good', python kernel")
    bad = tmp_path / "bad.toml"
    bad.write_text(MINIMAL + "[trees]\nprefix = 'int'\n")
    assert main(["check", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("mlkaps-gpu: error: bad.toml: [trees]")
    assert main(["check", str(tmp_path / "missing.toml")]) == 2
    assert "no such configuration file" in capsys.readouterr().err


# ----------------------------------------------------------------------------- documentation
def test_config_reference_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "config_reference.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_config_reference_lists_every_key() -> None:
    reference = (ROOT / "docs" / "config.md").read_text()
    for section, info in CampaignConfig.model_fields.items():
        assert f"## [{section}]" in reference
        models = EXECUTOR_SETTINGS.values() if section == "kernel" else [info.annotation]
        for model in models:
            for key in getattr(model, "model_fields", {}):
                assert f"| `{key}` |" in reference, (section, key)


def _toml_blocks() -> list[tuple[str, int, str]]:
    blocks = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^```toml\n(.*?)^```", text, flags=re.S | re.M):
            line = text[: match.start()].count("\n") + 1
            blocks.append((path.name, line, match.group(1)))
    return blocks


BLOCKS = _toml_blocks()

USER_KERNEL = '''
def run(**row):
    """The README's example kernel (``mypackage.kernels:run``): a user's timed routine."""
'''


@pytest.mark.parametrize(
    ("name", "line", "block"), BLOCKS, ids=[f"{n}:{line}" for n, line, _ in BLOCKS]
)
def test_documentation_toml_blocks(
    name: str,
    line: int,
    block: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Complete examples (with a [kernel]) pass ``check``; fragments (first line ``# fragment``)
    parse as TOML and each of their sections validates on its own."""
    data = tomllib.loads(block)
    if block.startswith("# fragment"):
        assert "kernel" not in data, "a fragment with a [kernel] section is a complete example"
        for section, table in data.items():
            annotation = CampaignConfig.model_fields[section].annotation
            annotation.model_validate(table, context={"base": str(tmp_path)})
        return
    assert "kernel" in data, "a block without [kernel] must start with '# fragment'"
    if "${MLKAPS_GPU_DATA}" in block and "MLKAPS_GPU_DATA" not in __import__("os").environ:
        pytest.skip("MLKAPS_GPU_DATA is not set")
    package = tmp_path / "mypackage"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kernels.py").write_text(textwrap.dedent(USER_KERNEL))
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / f"{name}_{line}.toml"
    config.write_text(block)
    code = main(["check", str(config)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out.startswith("OK ")


def test_every_documentation_block_is_found() -> None:
    assert sum(1 for name, _, _ in BLOCKS if name == "README.md") >= 2
    assert any(name == "distributed.md" for name, _, _ in BLOCKS)


def test_load_config_reads_files(tmp_path: Path) -> None:
    path = tmp_path / "lu.toml"
    path.write_text(MINIMAL + "[campaign]\nname = 'lu small'\n")
    assert load_config(path).name == "lu small"
    path.write_text(MINIMAL + "[campaign]\nname = 'a??/b'\n")
    with pytest.raises(ConfigError, match=r"lu.toml: \[campaign\] name: .*trigraph"):
        load_config(path)
