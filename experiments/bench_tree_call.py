"""Cost of one call of a generated C selector, for joint trees of depth 4, 8 and 12.

The trees are fitted to the ``lu`` kernel's analytic cost model (``scripts/kernel_models.py``:
inputs m, n in [64, 1024], constraint ``nb <= min(m, n)``, so ``<prefix>_select`` runs the tree
and then the run-time validity check). A small C program, compiled with ``gcc -O2`` (no
``-ffast-math``), calls through a non-inlined wrapper:

- ``select``: ``<prefix>_select(m, n)`` (tree + validity check + rare fallback), with the
  default leaf functions (branch-free threshold counts and a cell table,
  ``mlkaps_gpu/trees/_codegen_table.py``);
- ``select_if``: the same selector generated with ``lookup=False`` (nested ``if`` only);
- ``tree``: ``<prefix>_tree_select(m, n)`` (the tree alone, lookup form);
- ``empty``: a wrapper with the same signature doing no work (the loop and call overhead);

over four input patterns of 2**18 calls each (a fixed LCG): ``random`` log-uniform inputs (no
branch can be predicted: the worst case), ``shapes16`` (16 recurring problem shapes in random
order), ``sweep`` (n += 1 per call, m every 961 calls: inputs vary, neighbouring calls share most
of their path) and ``constant`` (one input: every branch predicted). The calls are timed in
chunks of 4096, interleaved over functions and patterns, for ``--repeats`` passes; the machine
is shared (2 cores, other developers' tests), so the table gives the 10th percentile (the
uncontended cost) and the median of the chunks, in ns per call; ``net select`` is
``select - empty``.

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
from benchkit.provenance import header, provenance
from benchkit.repo_scripts import script_module

from mlkaps_gpu.codegen import NamePlan, render_header
from mlkaps_gpu.trees import JointSelector

kernel_model = script_module("kernel_models").kernel_model

PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "selector.h"
#include "branches.h"

#define N_INPUTS (1 << 18)
#define CHUNK 4096
#define N_PATTERNS 4
#if defined(__GNUC__) && !defined(__clang__)
#define OPAQUE __attribute__((noinline, noipa))
#else
#define OPAQUE __attribute__((noinline))
#endif

static long long in_m[N_PATTERNS][N_INPUTS], in_n[N_PATTERNS][N_INPUTS];
static const char *pattern_names[N_PATTERNS] = {"random", "shapes16", "sweep", "constant"};

OPAQUE static long long call_select(long long m, long long n)
{
    CONFIG c = SELECT(m, n);
    return FIELDS;
}

OPAQUE static long long call_select_if(long long m, long long n)
{
    IFCONFIG c = IFSELECT(m, n);
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

/* Time CHUNK consecutive calls starting at 'offset' (short, so that most chunks run without
 * being preempted on a loaded machine); ns per call. */
static double run(call_t f, int pattern, int offset, long long *sink)
{
    const long long *m = in_m[pattern] + offset, *n = in_n[pattern] + offset;
    long long s = 0;
    int i;
    double start = now();
    for (i = 0; i < CHUNK; ++i) s += f(m[i], n[i]);
    *sink += s;
    return (now() - start) * 1e9 / CHUNK;
}

static unsigned long long state = 88172645463325252ULL;

static double uniform(void)
{
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(state >> 11) / 9007199254740992.0;
}

static long long log_uniform(void)
{
    return (long long)floor(64.0 * exp(uniform() * log(16.0)) + 0.5);
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 15, r, i, k, p;
    long long sink = 0, shape_m[16], shape_n[16];
    call_t calls[4];
    calls[0] = call_select;
    calls[1] = call_tree;
    calls[2] = call_empty;
    calls[3] = call_select_if;
    for (i = 0; i < 16; ++i) {
        shape_m[i] = log_uniform();
        shape_n[i] = log_uniform();
    }
    for (i = 0; i < N_INPUTS; ++i) {
        int shape = (int)(uniform() * 16.0);
        in_m[0][i] = log_uniform(); /* random: nothing to predict */
        in_n[0][i] = log_uniform();
        in_m[1][i] = shape_m[shape]; /* 16 recurring shapes in random order */
        in_n[1][i] = shape_n[shape];
        in_m[2][i] = 64 + (i / 961) % 961; /* a sweep: n steps by 1, m every 961 calls */
        in_n[2][i] = 64 + i % 961;
        in_m[3][i] = shape_m[0]; /* one input */
        in_n[3][i] = shape_n[0];
    }
    for (r = 0; r < repeats; ++r) {
        for (i = 0; i < N_INPUTS; i += CHUNK) {
            for (p = 0; p < N_PATTERNS; ++p) {
                for (k = 0; k < 4; ++k) {
                    printf("%d %s %.4f\n", k, pattern_names[p], run(calls[k], p, i, &sink));
                }
            }
        }
    }
    fprintf(stderr, "checksum %lld\n", sink);
    return 0;
}
"""

PATTERNS = ("random", "shapes16", "sweep", "constant")
NAMES = {0: "select", 1: "tree", 2: "empty", 3: "select_if"}


def program_source(selector: JointSelector, prefix: str) -> str:
    model = selector.model_
    plan = NamePlan.build(prefix, model.inputs, model.design, model.tree_names)
    fields = " + ".join(f"(long long)c.{names.field}" for names in plan.outputs)
    nested = NamePlan.build(prefix + "_if", model.inputs, model.design, model.tree_names)
    return (
        PROGRAM.replace("IFCONFIG", nested.config_type)
        .replace("IFSELECT", nested.select_function)
        .replace("CONFIG", plan.config_type)
        .replace("SELECT", plan.select_function)
        .replace("TREE", plan.validity.tree_select)
        .replace("FIELDS", fields)
    )


def measure(selector: JointSelector, repeats: int, compiler: str) -> pd.DataFrame:
    """Per (function, input pattern): min and median ns per call over the repeats."""
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        (directory / "selector.h").write_text(render_header(selector, "bench"), encoding="utf-8")
        nested = render_header(selector, "bench_if", lookup=False)
        (directory / "branches.h").write_text(nested, encoding="utf-8")
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
    return (
        table.groupby(["function", "inputs"])["ns"]
        .agg(["min", lambda ns: ns.quantile(0.1), "median"])
        .set_axis(["min", "p10", "median"], axis=1)
    )


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
            model.optima,
            model.space.inputs,
            model.space.design,
            space=model.space,
            score=model.cost,
        )
        tree = selector.model_.trees[0]
        times = measure(selector, args.repeats, args.compiler)
        for pattern in PATTERNS:
            row: dict[str, object] = {
                "max_depth": depth,
                "depth": tree.depth,
                "leaves": tree.n_leaves,
                "inputs": pattern,
            }
            for function in ("select", "select_if", "tree", "empty"):
                low, tenth, middle = times.loc[(function, pattern)]
                row[f"{function} p10"] = round(float(tenth), 2)
                row[f"{function} median"] = round(float(middle), 2)
            net = times.loc[("select", pattern), "p10"] - times.loc[("empty", pattern), "p10"]
            row["net select p10"] = round(float(net), 2)
            net_if = times.loc[("select_if", pattern), "p10"] - times.loc[("empty", pattern), "p10"]
            row["net select_if p10"] = round(float(net_if), 2)
            rows.append(row)
    print(header(provenance(), markdown=True))
    print(
        f"ns per call over {args.repeats} passes of 2**18 calls timed in chunks of 4096 "
        f"({args.compiler} -O2): 10th percentile (the machine is shared: most chunks are "
        "slowed by other processes) and median of the chunks; net select = select p10 - empty "
        "p10. select: the default header (threshold counts + cell table); select_if: the same "
        "trees as nested ifs (lookup=False). Inputs: 'random' log-uniform (no branch "
        "predictable), 'shapes16' 16 recurring shapes in random order, 'sweep' n += 1 per "
        "call, 'constant' one input."
    )
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
