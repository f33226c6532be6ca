"""Mutated constraint strings: valid constraints damaged the way a hurried user or an attacker
would (operators and names inserted or deleted, look-alike Unicode, trigraphs, NUL bytes,
literals beyond the double range, deep nesting, huge repetitions...).

Used by ``experiments/fuzz_config.py`` (1,000 strings through the configuration loader, then
every accepted one through compiled C) and by a quick test.
"""

from __future__ import annotations

import random

from mlkaps_gpu.space import Parameter

#: The parameters mutated constraints may name (and their values in the test rows).
PARAMETERS = [
    Parameter("n", "int", low=1, high=4096),
    Parameter("m", "float", low=0.0, high=1.0),
    Parameter("block", "int", values=(1, 2, 4, 8, 16, 32, 64, 128)),
    Parameter("variant", "categorical", values=("a", "b")),
    Parameter("flag", "bool"),
]

SEEDS = [
    "block <= n",
    "block * block <= n * 4",
    "variant == 'a' or block >= 16",
    "n % block == 0",
    "n // block >= 2",
    "block < 128 or ((block - 128) / (m - 0.3)) ** 0 > 0",
    "min(block, n) == block",
    "max(block, 2, 3) < n",
    "abs(n - block) > 3",
    "not flag or block > 4",
    "1 <= block <= n < 4096",
    "block ** 2 <= n ** 2",
    "m * block < 100.5",
    "n / block != 3.5",
    "(n + block) % 3 != 1 and variant != 'b'",
    "flag == True or m >= 0.25",
    "block <= n and (n - block) // 2 >= 0",
    "-block < n",
    "n ** 0.5 >= block ** 0.5 - 1",
    "block // 0 == 1 or block <= n",
]

TOKENS = [
    " + ", " - ", " * ", " / ", " // ", " % ", " ** ", " < ", " <= ", " == ", " != ", " > ",
    " >= ", " and ", " or ", " not ", "(", ")", "((", "))", ",", "n", "m", "block", "variant",
    "flag", "nn", "blocks", "0", "1", "-1", "0.0", "1e308", "1e400", "-1e400", "9**9**9",
    "9" * 400, "0x10", "1_000", "True", "False", "None", "'a'", "'b'", "'z'", '"a"', "min(",
    "max(", "abs(", "pow(", "len(", "__import__('os')", "lambda: 1", "[1]", "{}", ".real",
    "[0]", " if ", " else ", " in ", " is ", " << ", " & ", " ~", ";", ":", "=", ":=", "\\",
    "??/", "??=", "\u00e9", "\uff42lock", "\u2024", "\u200b", "\x00", "\n", "\t", "#", "'",
    '"', "`", "$", "@", "...", "nan", "inf", "NAN", "INFINITY", "HUGE_VAL", "floor(",
]  # fmt: skip


def _insert(rng: random.Random, text: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice(TOKENS) + text[at:]


def _delete(rng: random.Random, text: str) -> str:
    if not text:
        return text
    start = rng.randrange(len(text))
    return text[:start] + text[start + rng.randint(1, 6) :]


def _replace(rng: random.Random, text: str) -> str:
    if not text:
        return rng.choice(TOKENS)
    at = rng.randrange(len(text))
    return text[:at] + rng.choice(TOKENS) + text[at + 1 :]


def _duplicate(rng: random.Random, text: str) -> str:
    if not text:
        return text
    start = rng.randrange(len(text))
    piece = text[start : start + rng.randint(1, 12)]
    return text[:start] + piece * rng.randint(2, 40) + text[start:]


def _nest(rng: random.Random, text: str) -> str:
    depth = rng.choice([1, 3, 20, 99, 101, 150, 1000])
    return "(" * depth + text + ")" * depth


def _combine(rng: random.Random, text: str) -> str:
    joiner = rng.choice([" and ", " or ", " < ", " + ", " == "])
    return f"({text}){joiner}({rng.choice(SEEDS)})"


def _chain(rng: random.Random, text: str) -> str:
    return " < ".join([text] * rng.choice([2, 5, 50]))


_MUTATIONS = [_insert, _delete, _replace, _duplicate, _nest, _combine, _chain]


def mutated_constraint(rng: random.Random) -> str:
    """One mutated constraint: a seed with one to three random mutations."""
    text = rng.choice(SEEDS)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        text = rng.choice(_MUTATIONS)(rng, text)
    return text
