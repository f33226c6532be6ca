"""Fuzz the config loader: N random configurations (well-formed and damaged) must each be either
accepted (a valid campaign) or rejected with a one-line ConfigError; anything else is a failure.
Then M mutated constraint strings go through the same loader: each is refused with a one-line
ConfigError (and no file written) or accepted, and every accepted one is written as C, compiled
(one cffi module for all) and evaluated on random rows, where it must agree with numpy.

    python experiments/fuzz_config.py --count 10000 --constraints 1000
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

from benchkit import provenance

from mlkaps_gpu.campaign import ConfigError, parse_config, prepare
from mlkaps_gpu.testing import random_config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--constraints", type=int, default=1_000, help="mutated constraint strings (0: none)"
    )
    args = parser.parse_args()
    outcomes: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    failures = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for index in range(args.count):
            text = random_config(random.Random(args.seed * 1_000_003 + index))
            try:
                prepare(parse_config(text, path=Path(folder) / "fuzz.toml", label="fuzz.toml"))
                outcomes["accepted"] += 1
            except ConfigError as error:
                message = str(error)
                if "\n" in message.strip():
                    outcomes["multi-line message"] += 1
                    failures.append((index, message))
                else:
                    outcomes["rejected"] += 1
                    reasons[message.split(": ")[1] if ": " in message else message] += 1
            except Exception:  # noqa: BLE001 - the point is to catch what should not escape
                outcomes["traceback"] += 1
                failures.append((index, traceback.format_exc(limit=3)))
    seconds = time.perf_counter() - started
    print(provenance.header(provenance.provenance(), markdown=True), end="")
    print("| outcome | count |\n|---|---|")
    for outcome in ("accepted", "rejected", "multi-line message", "traceback"):
        print(f"| {outcome} | {outcomes[outcome]} |")
    print(f"\n{args.count} configurations in {seconds:.1f} s")
    print("most common rejection places:")
    for reason, count in reasons.most_common(8):
        print(f"  {count:5d}  {reason}")
    from mlkaps_gpu.space import ConstraintError, Parameter, parse_constraint

    parameters = {"n": Parameter("n", "int", low=1, high=1024)}
    long_constraints = {
        "sum of 2,500 terms": " + ".join(["n"] * 2500) + " < 5",
        "5,000 nested parentheses": "(" * 5000 + "n" + ")" * 5000 + " < 5",
        "chain of 2,500 comparisons": "n < " * 2499 + "n",
    }
    print("\nlong constraints (parse time, outcome):")
    for label, text in long_constraints.items():
        begin = time.perf_counter()
        try:
            parse_constraint(text, parameters)
            outcome = "parsed"
        except ConstraintError as error:
            outcome = f"refused: {str(error)[-60:]}"
        print(f"  {label} ({len(text)} chars): {time.perf_counter() - begin:.4f} s, {outcome}")
    for index, text in failures[:5]:
        print(f"--- failure at config {index}:\n{text}")
    constraint_failures = fuzz_constraints(args.constraints, args.seed) if args.constraints else 0
    return 1 if failures or constraint_failures else 0


CONSTRAINT_CONFIG = """\
[kernel]
executor = "python"
function = "math:hypot"

[inputs]
n = { type = "int", range = [1, 4096] }
m = { type = "float", range = [0.0, 1.0] }

[design]
block = { type = "int", values = [1, 2, 4, 8, 16, 32, 64, 128] }
variant = { type = "categorical", values = ["a", "b"] }
flag = { type = "bool" }
constraints = [%s]

[sampling]
budget = 10
"""


def fuzz_constraints(count: int, seed: int) -> int:
    """Mutated constraint strings through the loader, then the accepted ones through C;
    prints a table and returns the number of failures."""
    from mlkaps_gpu.testing import mutated_constraint

    rng = random.Random(seed)
    outcomes: collections.Counter[str] = collections.Counter()
    accepted: list[str] = []
    failures: list[tuple[str, str]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for index in range(count):
            constraint = mutated_constraint(rng)
            outcome = _load_constraint(constraint, Path(folder), index)
            if outcome == "accepted":
                accepted.append(constraint)
            elif outcome.startswith("refused"):
                outcomes[outcome] += 1
            else:
                failures.append((constraint, outcome))
        compile_seconds, disagreements = _compare_in_c(accepted, Path(folder), seed, failures)
    seconds = time.perf_counter() - started
    print(f"\n{count} mutated constraint strings in {seconds:.1f} s:")
    print("| outcome | count |\n|---|---|")
    print(f"| accepted | {len(accepted)} |")
    for outcome in sorted(outcomes):
        print(f"| {outcome} | {outcomes[outcome]} |")
    print(f"| traceback, late failure or file written | {len(failures)} |")
    print(
        f"the {len(accepted)} accepted ones: one C module compiled in {compile_seconds:.1f} s, "
        f"{_ROWS} rows each, {disagreements} disagreements with numpy"
    )
    for constraint, problem in failures[:5]:
        print(f"--- {constraint!r}:\n{problem}")
    return len(failures)


_ROWS = 512


def _load_constraint(constraint: str, folder: Path, index: int) -> str:
    """``accepted``, ``refused ...`` or the description of a failure."""
    import json

    from mlkaps_gpu.campaign import Campaign, CampaignError
    from mlkaps_gpu.space import SpaceError

    text = CONSTRAINT_CONFIG % json.dumps(constraint, ensure_ascii=False)
    refusals = (ConfigError, CampaignError, SpaceError)
    try:
        config = parse_config(text, path=folder / "fuzz.toml", label="fuzz.toml")
    except refusals as error:
        return "refused when parsed" if "\n" not in str(error).strip() else f"multi-line {error}"
    except Exception:  # noqa: BLE001 - the point is to catch what should not escape
        return traceback.format_exc(limit=3)
    try:
        prepare(config)
    except refusals as error:
        if "\n" in str(error).strip():
            return f"multi-line message: {error}"
        out = folder / f"run{index}"
        try:  # a campaign must refuse it too, before writing anything
            Campaign.create_or_resume(config, out).close()
            return "refused by prepare, accepted by tune"
        except refusals:
            pass
        return "a file was written before the refusal" if out.exists() else "refused when checked"
    except Exception:  # noqa: BLE001
        return traceback.format_exc(limit=3)
    return "accepted"


def _compare_in_c(
    accepted: list[str], folder: Path, seed: int, failures: list[tuple[str, str]]
) -> tuple[float, int]:
    """Compile every accepted constraint into one C module and compare it with numpy on
    random rows; returns (compile seconds, constraints that disagree)."""
    import numpy as np

    from mlkaps_gpu.space import parse_constraint
    from mlkaps_gpu.testing import PARAMETERS, CompiledConstraints, same_values

    by_name = {p.name: p for p in PARAMETERS}
    parsed = [parse_constraint(c, by_name) for c in accepted]
    began = time.perf_counter()
    try:
        compiled = CompiledConstraints(parsed, PARAMETERS, workdir=folder / "c")
    except Exception as error:  # noqa: BLE001 - a compile failure is what this looks for
        failures.append(("(all accepted)", f"the C compiler refused them: {error}"))
        return time.perf_counter() - began, len(parsed)
    seconds = time.perf_counter() - began
    rows = np.random.default_rng(seed)
    columns = {
        "n": rows.integers(1, 4097, _ROWS).astype(float),
        "m": rows.choice([0.0, 0.3, 0.25, 1.0, 0.5], _ROWS),
        "block": rows.choice([1, 2, 4, 8, 16, 32, 64, 128], _ROWS).astype(float),
        "variant": rows.choice(np.array(["a", "b"], dtype=object), _ROWS),
        "flag": rows.integers(0, 2, _ROWS).astype(float),
    }
    disagreements = 0
    for index, constraint in enumerate(parsed):
        expected = constraint.value(columns, _ROWS)
        if not same_values(expected, compiled.values(index, columns, _ROWS)).all():
            disagreements += 1
            failures.append((constraint.source, "numpy and C disagree"))
    return seconds, disagreements


if __name__ == "__main__":
    sys.exit(main())
