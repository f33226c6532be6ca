"""Random configurations for robustness checks of the config loader and constraint parser.

Used by the property tests and by ``experiments/fuzz_config.py``: generated configurations mix
well-formed and broken sections, keys, types and constraint texts; loading any of them must either
succeed or raise :class:`ConfigError` (a one-line message), never anything else.
"""

from __future__ import annotations

import json
import random
from typing import Any

_TYPES = ["int", "float", "categorical", "bool", "integer", "", "str", 3]
_NAMES = ["n", "m", "block", "tile", "threads", "variant", "x y", "1a", "n", "class", "_p", "é"]
_OPERATORS = [
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "**",
    "<",
    "<=",
    "==",
    "!=",
    ">",
    ">=",
    " and ",
    " or ",
]
_ATOMS = [
    "n",
    "m",
    "block",
    "tile",
    "0",
    "1",
    "2.5",
    "-3",
    "1e308",
    "'fast'",
    "True",
    "min(n, block)",
    "max(block, 2, 3)",
    "abs(-tile)",
    "not block",
    "(n)",
    "__import__('os')",
    "n.real",
    "n[0]",
    "lambda: 1",
    "open('x')",
    "x",
    "[1]",
    "{}",
    "n if m else 1",
    "9**9**9",
    ")",
    "(",
    "",
    "'",
    "\\x00",
    "block ==",
    "f(n)",
]


def random_constraint(rng: random.Random, depth: int = 0) -> str:
    """A random constraint text: atoms (names, numbers, broken fragments) joined by
    operators, up to four levels deep, sometimes parenthesised; well-formed or not."""
    if depth > 3 or rng.random() < 0.3:
        return rng.choice(_ATOMS)
    left = random_constraint(rng, depth + 1)
    right = random_constraint(rng, depth + 1)
    text = f"{left} {rng.choice(_OPERATORS)} {right}"
    return f"({text})" if rng.random() < 0.3 else text


def _value(rng: random.Random) -> Any:
    return rng.choice(
        [
            0,
            1,
            -1,
            2**70,
            3.5,
            float("inf"),
            "x",
            True,
            [],
            [1, 2],
            [2, 1],
            ["a", "b"],
            [1, "a"],
            {"a": 1},
            [[1]],
            None,
            [1, 1],
            1e-300,
        ]
    )


def _parameter(rng: random.Random) -> Any:
    spec: dict[str, Any] = {}
    if rng.random() < 0.95:
        spec["type"] = rng.choice(_TYPES)
    choice = rng.random()
    if choice < 0.45:
        low, high = rng.choice([(1, 64), (64, 1), (0, 0), (-5, 5), (1.5, 2.5), (0.0, 1e9)])
        spec["range"] = [low, high] if rng.random() < 0.9 else [low]
    elif choice < 0.9:
        spec["values"] = rng.choice(
            [[1, 2, 4], [], ["a", "b"], [True, False], [1, 1], [0.5, 1.5], [1, "x"], [3]]
        )
    if rng.random() < 0.2:
        spec["log"] = rng.choice([True, False, 1, "yes"])
    if rng.random() < 0.05:
        spec["bogus"] = _value(rng)
    if rng.random() < 0.05:
        return _value(rng)
    return spec


def _valid_sections(rng: random.Random) -> dict[str, dict[str, Any]]:
    """A well-formed configuration with random but sensible content."""
    inputs = {
        "n": {"type": "int", "range": [16, rng.choice([64, 1024, 4096])], "log": rng.random() < 0.5}
    }
    if rng.random() < 0.5:
        inputs["m"] = {"type": "float", "range": [0.5, 2.0]}
    design: dict[str, Any] = {
        "block": {"type": "int", "values": rng.sample([1, 2, 4, 8, 16, 32], rng.randint(1, 6))},
    }
    if rng.random() < 0.5:
        design["variant"] = {"type": "categorical", "values": ["fast", "slow"]}
    if rng.random() < 0.3:
        design["flag"] = {"type": "bool"}
    design["constraints"] = rng.choice([[], ["block <= n"], ["block * 2 <= n + 1", "n >= 1"]])
    return {
        "kernel": {"executor": "python", "function": "math:hypot"},
        "inputs": inputs,
        "design": design,
        "sampling": {
            "budget": rng.choice([10, 100]),
            "method": rng.choice(["lhs", "random", "ga_adaptive"]),
        },
        "optimization": {"grid": rng.choice([4, {"n": 3}])},
        "trees": {"max_depth": rng.choice([3, 8]), "prefix": "ok"},
    }


def _mutate(sections: dict[str, dict[str, Any]], rng: random.Random) -> None:
    """One random damage: a wrong value, a broken parameter, a bad constraint, a removal..."""
    section = rng.choice(list(sections))
    table = sections[section]
    roll = rng.random()
    if roll < 0.2 and table:
        del table[rng.choice(list(table))]
    elif roll < 0.4 and section in ("inputs", "design"):
        table[rng.choice(_NAMES)] = _parameter(rng)
    elif roll < 0.6:
        sections["design"]["constraints"] = [random_constraint(rng)]
    elif roll < 0.8 and table:
        table[rng.choice(list(table))] = _value(rng)
    elif roll < 0.9:
        table[rng.choice(["bogus", "budget", "method", "executor", "grid"])] = _value(rng)
    else:
        sections[rng.choice(["bogus", "objectives", "kernel"])] = {
            "time": rng.choice(["minimize", "up", 1])
        }


def random_config(rng: random.Random) -> str:
    """A TOML text, well-formed or not, for a python-kernel campaign (about one in three is
    valid as generated; the others carry one or more random defects)."""
    sections = _valid_sections(rng)
    defects = 0 if rng.random() < 0.35 else rng.randint(1, 4)
    for _ in range(defects):
        _mutate(sections, rng)
    text = to_toml(sections)
    if rng.random() < 0.1:  # byte-level damage
        position = rng.randrange(max(1, len(text)))
        damage = rng.choice(["\x00", "[", "=", '"', "\n[x", "}", ""])
        text = text[:position] + damage + text[position + rng.randint(0, 5) :]
    return text


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
        )
    return '"none"'


def to_toml(sections: dict[str, dict[str, Any]]) -> str:
    lines = []
    for section, table in sections.items():
        lines.append(f"[{section}]")
        for key, value in table.items():
            lines.append(f"{json.dumps(key)} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)
