"""Fuzz the config loader: N random configurations (well-formed and damaged) must each be either
accepted (a valid campaign) or rejected with a one-line ConfigError; anything else is a failure.

    python experiments/fuzz_config.py --count 10000
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

from mlkaps_gpu.campaign import ConfigError, parse_config
from mlkaps_gpu.campaign._setup import prepare
from mlkaps_gpu.testing._fuzz import random_config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
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
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
