"""Benchmark the project against peer tuners on replayed exhaustive data (issue 18, Build 6).

Protocol. For every evaluation budget ``b`` per input value (default 25, 50, 100, 200) and seed
(default 5 seeds), each tool tunes the replayed kernel; its choice for every input value is
looked up in the exhaustive data. Fraction of optimum = ``t_opt / t(choice)`` per input value
(0 when the choice failed); the geometric mean over the input values (0 as soon as one is 0) is one
run's score; tables give mean ± sd (ddof=1) of that score over the seeds.

Cases: ``convolution`` (5 GPUs, the GPU a categorical input; ``configs/convolution_replay.toml``)
and ``syr2k`` (N = 130 and N = 2000, N a categorical input; ``configs/syr2k_replay.toml``), or
``--config FILE.toml``: a replay config of one's own (``executor = "replay"``, ``files`` mapping
one input to a Kernel Tuner cache or CSV table per value; one value is enough), scored the same
way on its data (case name: the file's stem; ``MLKAPS_GPU_DATA`` is then not needed).

Tools:

* ``project header``: one campaign per (b, seed) with total budget ``B = n_inputs * b`` and the
  configuration's *problem* only (kernel and data, design constraints, objectives, seed, header
  prefix): every method setting (sampling method, batch size, log target, grid, tree mode and
  depth, verification size...) is stripped so that the project's defaults are what is measured.
  ``--set section.key=value`` / ``--config-extra file.toml`` put settings back. The header is
  compiled (cffi) and its answer per input value is looked up in the data.
* ``project best measured``: the best configuration the same campaign measured per input value
  (its sample store). The Done-when-2 counts compare the header with it: runs (input, seed) where
  ``t(best measured) / t(header) < 0.99`` and ``< 0.9``.
* ``KT <strategy>``: Kernel Tuner in simulation mode on the same data, one search per input
  value with ``max_fevals = b`` (genetic_algorithm, simulated_annealing, diff_evo, pso, bayes_opt,
  random_sample; numpy and random seeded before each call, and scipy's Latin hypercube, which
  diff_evo and bayes_opt use for their first samples, given a generator from the same seed).
  bayes_opt's default method ("multi-ultrafast") decides when to refit its model from measured
  wall-clock durations, so its results can still vary with the machine's load. Convolution uses
  the original cache files (decompressed to a temporary folder) and the case's constraints as
  restrictions; syr2k's CSV tables are converted to Kernel Tuner caches (categorical values coded
  0, 1, ...; the runner's failure rows become ``RuntimeFailedConfig``); a config of one's own
  without constraints, whose data are not the whole product of the parameters' values, keeps
  Kernel Tuner to the configurations in the data. Score: best time among
  the evaluated configurations. KT's simulated_annealing ends its schedule at about 0.75 b
  distinct evaluations (its design); the md lists evaluations below b.
* ``Optuna TPE``: one TPE study per input value (categorical distributions over the design
  values, ``TPESampler(seed)``, ask/tell). A configuration absent from the data (it violates the
  constraints) is told a penalty (10 x the worst time of that input) and does not count; a
  repeated configuration is told its time again and does not count; a failed one counts and is
  told the penalty. So ``b`` counts distinct valid configurations (at most ``50 b`` asks). TPE
  does not depend on the total trial count, so one study to the largest ``b`` gives the result at
  every smaller ``b`` (its best after the first ``b`` distinct valid configurations).
* ``random search (exact)``: per input value the exact expectation, over ``b`` distinct uniform
  draws among all configurations of the data (the valid ones; recorded failures count as
  fraction 0), of the fraction of optimum of the best draw: ``E[max_i t_opt / t_i]`` (not
  ``t_opt / E[min t]``). The row is the geometric mean over input values of these expectations;
  it has no seeds (sd 0).

Input values. ``--only V [V ...]`` keeps those input values of the case (one campaign over them;
the case is named ``<case>_<V>_...``). ``--separately`` gives each input value its own project
campaign of ``b`` evaluations, with nothing learnt from the other values (the peers search each
value alone anyway): the tuner of one architecture, or of one problem size, alone. Scores are
then geomeans over the values of the separate campaigns (case ``<case>_separately``).

Outputs: ``experiments/results/bench_peers_<case>.{csv,md,png}`` (``bench_peers_quick_*`` with
``--quick``). Kernel Tuner and Optuna are optional (``pip install -e ".[bench]"``); rows of a
missing one say "not installed".

    export MLKAPS_GPU_DATA=../shared/data/replay
    python experiments/bench_peers.py --quick --case convolution
    python experiments/bench_peers.py --case all
    python experiments/bench_peers.py --config my_kernel_replay.toml --budgets 25 50
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from benchkit.cases import CaseError, case_name_of, load_case
from benchkit.provenance import script_command
from benchkit.report import report_case
from benchkit.runner import bench_case, log
from benchkit.tools import TOOL_IDS, parse_tools

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_BUDGETS = (25, 50, 100, 200)
QUICK_BUDGETS = (25, 50)


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--case",
        choices=["convolution", "syr2k", "all"],
        default=None,
        help="a built-in case (default: all)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE.toml",
        help='a replay config of your own as the case instead (executor = "replay", files '
        "mapping one input to a Kernel Tuner cache or CSV table per value)",
    )
    parser.add_argument("--budgets", type=int, nargs="+", default=None, help="b per input value")
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds (default 5)")
    parser.add_argument(
        "--tools",
        nargs="+",
        default=["project", "kernel_tuner", "optuna_tpe", "random_search"],
        help=f"subset of {', '.join(TOOL_IDS)} (kernel_tuner = every kt_*)",
    )
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="first seed (default 0): fresh seeds check a result away from the ones that chose "
        "the defaults",
    )
    parser.add_argument("--quick", action="store_true", help="2 seeds, b = 25 and 50")
    parser.add_argument("--workdir", type=Path, default=None, help="keep campaigns here")
    parser.add_argument("--results", type=Path, default=RESULTS, help="output folder")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="project setting over the defaults, e.g. sampling.method=ga_adaptive",
    )
    parser.add_argument("--config-extra", default=None, help="TOML merged over the problem")
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="VALUE",
        help="keep only these values of the case's input (e.g. --only A100 MI250X)",
    )
    parser.add_argument(
        "--separately",
        action="store_true",
        help="one project campaign of b evaluations per input value, nothing shared",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen cases and tools and write their results; 0, or 2 for a bad command line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.command_line = script_command("bench_peers.py", argv)
    if args.config is not None and args.case is not None:
        log("give --case (a built-in case) or --config (a replay config of yours), not both")
        return 2
    if args.config is None and not os.environ.get("MLKAPS_GPU_DATA"):
        log("MLKAPS_GPU_DATA is not set: point it at the replay data folder")
        return 2
    budgets = args.budgets or list(QUICK_BUDGETS if args.quick else DEFAULT_BUDGETS)
    count = args.seeds if args.seeds is not None else (2 if args.quick else 5)
    if count < 1 or args.first_seed < 0:
        log("--seeds must be >= 1 and --first-seed >= 0")
        return 2
    seeds = list(range(args.first_seed, args.first_seed + count))
    tools = parse_tools(args.tools)
    extra = tomllib.loads(Path(args.config_extra).read_text()) if args.config_extra else None
    stem = "bench_peers_quick" if args.quick else "bench_peers"
    chosen = args.case or "all"
    if args.only and args.config is None and chosen == "all":
        log("--only names values of one case's input: give --case convolution or --case syr2k")
        return 2
    cases: list[tuple[str, Path | None]]
    if args.config is not None:
        cases = [(case_name_of(args.config), args.config)]
    else:
        names = ["convolution", "syr2k"] if chosen == "all" else [chosen]
        cases = [(name, None) for name in names]
    np.seterr(all="ignore")
    started = time.perf_counter()
    temporary = None
    if args.workdir is None:
        temporary = tempfile.mkdtemp(prefix="bench_peers_")
        workdir = Path(temporary)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        for name, path in cases:
            case_started = time.perf_counter()
            try:
                case = load_case(name, args.set, extra, args.only, args.separately, path)
            except CaseError as error:
                log(str(error))
                return 2
            table, wall, tune, missing = bench_case(case, budgets, seeds, tools, workdir, started)
            text = report_case(
                case,
                table,
                wall,
                tune,
                missing,
                args,
                budgets,
                seeds,
                tools,
                time.perf_counter() - case_started,
                args.results,
                stem,
            )
            print(text, flush=True)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    log(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
