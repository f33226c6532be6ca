"""Cost of one call of a generated C selector, for joint trees of depth 4, 8 and 12.

The trees are fitted to the ``lu`` kernel's analytic cost model (``scripts/kernel_models.py``:
inputs m, n in [64, 1024], constraint ``nb <= min(m, n)``, so ``<prefix>_select`` runs the tree
and then the run-time validity check). A small C program, compiled with ``gcc -O2`` (no
``-ffast-math``), calls through a non-inlined wrapper:

- ``select``: ``<prefix>_select(m, n)`` (tree + validity check + rare fallback);
- ``tree``: ``<prefix>_tree_select(m, n)`` (the tree alone);
- ``empty``: a wrapper with the same signature doing no work (the loop and call overhead);

over 2**20 inputs drawn log-uniformly (a fixed LCG), so consecutive calls take different paths
and the branch predictor cannot learn them, and over one repeated input (all branches
predicted), for contrast. Each loop is timed ``--repeats`` times, interleaved; the machine is
shared, so the table gives the minimum and the median, in ns per call. ``net`` is
``select - empty`` (minimum of each).

    python experiments/bench_tree_call.py [--repeats 15] [--depths 4 8 12]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from kernel_models import kernel_model  # noqa: E402

from mlkaps_gpu.trees import JointSelector, NamePlan  # noqa: E402

PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "selector.h"

#define N_INPUTS (1 << 20)
#if defined(__GNUC__) && !defined(__clang__)
#define OPAQUE __attribute__((noinline, noipa))
#else
#define OPAQUE __attribute__((noinline))
#endif

static long long in_m[N_INPUTS], in_n[N_INPUTS];

OPAQUE static long long call_select(long long m, long long n)
{
    CONFIG c = SELECT(m, n);
    return FIELDS;
}

OPAQUE static long long call_tree(long long m, long long n)
{
    CONFIG c = TREE(m, n);
    return FIELDS;
}

OPAQUE static long long call_empty(long long m, long long n)
{
    return m ^ n;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef long long (*call_t)(long long, long long);

static double run(call_t f, int varied, long long *sink)
{
    long long s = 0;
    int i;
    double start = now();
    if (varied) {
        for (i = 0; i < N_INPUTS; ++i) s += f(in_m[i], in_n[i]);
    } else {
        for (i = 0; i < N_INPUTS; ++i) s += f(in_m[0], in_n[0]);
    }
    *sink += s;
    return (now() - start) * 1e9 / N_INPUTS;
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 15, r, i, k;
    unsigned long long state = 88172645463325252ULL;
    long long sink = 0;
    call_t calls[3];
    calls[0] = call_select;
    calls[1] = call_tree;
    calls[2] = call_empty;
    for (i = 0; i < N_INPUTS; ++i) {
        double u, v;
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        u = (double)(state >> 11) / 9007199254740992.0;
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        v = (double)(state >> 11) / 9007199254740992.0;
        in_m[i] = (long long)floor(64.0 * exp(u * log(16.0)) + 0.5);
        in_n[i] = (long long)floor(64.0 * exp(v * log(16.0)) + 0.5);
    }
    for (r = 0; r < repeats; ++r) {
        for (k = 0; k < 3; ++k) {
            printf("%d varied %.4f\n", k, run(calls[k], 1, &sink));
            printf("%d repeated %.4f\n", k, run(calls[k], 0, &sink));
        }
    }
    fprintf(stderr, "checksum %lld\n", sink);
    return 0;
}
"""

NAMES = {0: "select", 1: "tree", 2: "empty"}


def program_source(selector: JointSelector, prefix: str) -> str:
    model = selector.model_
    plan = NamePlan.build(prefix, model.inputs, model.design, model.tree_names)
    fields = " + ".join(f"(long long)c.{names.field}" for names in plan.outputs)
    return (
        PROGRAM.replace("CONFIG", plan.config_type)
        .replace("SELECT", plan.select_function)
        .replace("TREE", plan.validity.tree_select)
        .replace("FIELDS", fields)
    )


def measure(selector: JointSelector, repeats: int, compiler: str) -> pd.DataFrame:
    """Per (function, input pattern): min and median ns per call over the repeats."""
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        (directory / "selector.h").write_text(selector.to_c("bench"), encoding="utf-8")
        (directory / "bench.c").write_text(program_source(selector, "bench"), encoding="utf-8")
        command = [compiler, "-O2", "-std=gnu99", "bench.c", "-o", "bench", "-lm"]
        subprocess.run(command, cwd=directory, check=True)
        output = subprocess.run(
            [str(directory / "bench"), str(repeats)],
            cwd=directory,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    rows = []
    for line in output.splitlines():
        function, pattern, value = line.split()
        rows.append({"function": NAMES[int(function)], "inputs": pattern, "ns": float(value)})
    table = pd.DataFrame(rows)
    return table.groupby(["function", "inputs"])["ns"].agg(["min", "median"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[4, 8, 12])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--compiler", default="gcc")
    args = parser.parse_args()
    if shutil.which(args.compiler) is None:
        print(f"{args.compiler} not found", file=sys.stderr)
        return 2
    model = kernel_model("lu")
    rows = []
    for depth in args.depths:
        selector = JointSelector(max_depth=depth).fit(
            model.optima, model.space.inputs, model.space.design, space=model.space, score=model.cost
        )
        tree = selector.model_.trees[0]
        times = measure(selector, args.repeats, args.compiler)
        row: dict[str, object] = {"max_depth": depth, "depth": tree.depth, "leaves": tree.n_leaves}
        for function in ("select", "tree", "empty"):
            for pattern in ("varied", "repeated"):
                low, middle = times.loc[(function, pattern)]
                row[f"{function} {pattern}"] = f"{low:.2f} / {middle:.2f}"
        net = times.loc[("select", "varied"), "min"] - times.loc[("empty", "varied"), "min"]
        row["net select (varied)"] = round(float(net), 2)
        rows.append(row)
    print(
        f"ns per call, minimum / median of {args.repeats} timed loops of 2**20 calls "
        f"({args.compiler} -O2; 'varied': log-uniform random inputs, 'repeated': one input)"
    )
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
