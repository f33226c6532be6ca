"""The ``mlkaps-gpu`` command line: one module of commands; errors are one line, exit status 2."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mlkaps_gpu import __version__
from mlkaps_gpu.cli._progress import Progress

EXIT_USAGE = 2
#: Exit status when the reader of standard output went away (128 + SIGPIPE, as a shell reports)
EXIT_BROKEN_PIPE = 141
#: Commands whose parser and implementation live in their own modules.
_COMMAND_MODULES = {
    "validate": "mlkaps_gpu.cli._validate",
    "merge": "mlkaps_gpu.cli._merge",
    "report": "mlkaps_gpu.cli._report",
    "export": "mlkaps_gpu.cli._export",
    "export-cache": "mlkaps_gpu.cli._export_cache",
    "analyze": "mlkaps_gpu.cli._analyze",
    "check": "mlkaps_gpu.cli._check",
}
#: One-line help of those commands, so that ``--help``, ``--version`` and every other command
#: build the parser without importing their modules (and the libraries they import); a
#: command missing here has its module imported whenever the parser is built.
_COMMAND_HELP = {
    "validate": "measure the header's configurations against a reference",
    "merge": "keep the tuned configuration only where it beats an expert's; new header",
    "report": "one self-contained HTML report of a campaign",
    "export": "one header selecting between several campaigns' trees (one per architecture)",
    "export-cache": "write a campaign's measurements at one input point as a Kernel Tuner cache",
    "analyze": "offline analyses of exhaustive data",
    "check": "validate a TOML configuration without running anything",
}
log = logging.getLogger("mlkaps_gpu")


def build_parser(command: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The ``mlkaps-gpu`` parser; with ``lazy``, only ``command``'s module is imported (the other
    module commands get a placeholder that names them and their help)."""
    parser = argparse.ArgumentParser(
        prog="mlkaps-gpu",
        description="Input-aware auto-tuning of HPC kernels, shipped as C / CUDA decision trees.",
    )
    parser.add_argument("--version", action="version", version=f"mlkaps-gpu {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars or summary")
    parser.add_argument(
        "--json", action="store_true", help="machine-readable output: one JSON object per line"
    )
    parser.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    tune = commands.add_parser("tune", help="run (or resume) a campaign from a TOML config")
    tune.add_argument("config", type=Path)
    tune.add_argument("--out", type=Path, required=True, help="campaign directory")
    tune.add_argument(
        "--force",
        action="store_true",
        help="resume even if the config changed (rebuilds a damaged campaign.json)",
    )
    tune.add_argument(
        "--remeasure",
        action="store_true",
        help="a missing or damaged samples.sqlite: set it aside and measure again from scratch",
    )
    select = commands.add_parser(
        "select", help="the configuration the compiled header selects for given inputs"
    )
    select.add_argument("directory", type=Path)
    select.add_argument("assignments", nargs="*", metavar="name=value")
    select.add_argument(
        "--csv",
        type=Path,
        default=None,
        metavar="FILE",
        help="answer every row of a CSV table of inputs (header line: the input names), "
        "as CSV on standard output; '-' reads standard input",
    )
    select.add_argument(
        "--as-choice",
        action="store_true",
        help="also name each answer as the replayed data does (AutoHeuristic: a 'choice' "
        "column such as type=triton_BLOCK-M=64_..._numwarps=4)",
    )
    select.add_argument(
        "--ranked",
        action="store_true",
        help="every configuration the header ranks for the inputs, best first (the header's "
        "<prefix>_ranked: its answer, then the others in the order its leaf ranks them), for "
        "a library that takes the first it can run; a JSON list, or with --csv one row per "
        "configuration with its rank",
    )
    demo = commands.add_parser("demo", help="tune the built-in example end to end")
    demo.add_argument("--out", type=Path, default=Path("mlkaps-demo"))
    demo.add_argument("--budget", type=int, default=None, help="override the demo budget")
    for name, module_name in _COMMAND_MODULES.items():
        if lazy and name != command and name in _COMMAND_HELP:
            commands.add_parser(name, help=_COMMAND_HELP[name])
        else:
            importlib.import_module(module_name).add_parser(commands)
    return parser


def _requested_command(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is not an option or its value)."""
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mlkaps-gpu`` with ``argv`` (the process's arguments by default).

    Returns:
        The exit status: the command's, 2 for a usage error (a bad configuration, campaign
        directory or value: one line on stderr, no traceback), 130 when interrupted.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_requested_command(argv), lazy=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level), format="%(levelname)s %(message)s")
    try:
        if args.command == "tune":
            return _tune(args)
        if args.command == "select":
            return _select(args)
        if args.command == "demo":
            return _demo(args)
        if args.command in _COMMAND_MODULES:
            return int(importlib.import_module(_COMMAND_MODULES[args.command]).run(args))
    except BrokenPipeError:
        # the reader of standard output stopped (``select --csv ... | head``): nothing more to
        # say; the rest of the output goes nowhere, so that closing it raises nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as error:
        if not _is_usage_error(error):
            raise
        print(f"mlkaps-gpu: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("mlkaps-gpu: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


def _is_usage_error(error: Exception) -> bool:
    """Bad input (a configuration, a campaign directory, a value): reported on one line. The
    classes load here, not before: ``select`` loads none of the modules of the other two."""
    from mlkaps_gpu.campaign import CampaignError

    if isinstance(error, CampaignError):
        return True
    from mlkaps_gpu.campaign import ConfigError
    from mlkaps_gpu.space import SpaceError

    return isinstance(error, ConfigError | SpaceError)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def _run_campaign(
    config: Any,
    out: Path,
    *,
    force: bool,
    quiet: bool,
    as_json: bool = False,
    remeasure: bool = False,
) -> int:
    from mlkaps_gpu.campaign import Campaign

    _check_out(out)
    campaign = Campaign.create_or_resume(config, out, force=force, remeasure=remeasure)
    progress = Progress(quiet)
    started = time.perf_counter()
    try:
        summary = campaign.run(progress)
    finally:
        progress.close()
        campaign.close()
    seconds = time.perf_counter() - started
    if as_json:
        for stage, details in summary.items():
            print(json.dumps({"stage": stage, **details}))
        print(
            json.dumps(
                {
                    "campaign": config.name,
                    "seconds": round(seconds, 2),
                    "header": str(campaign.header_path),
                }
            )
        )
    elif not quiet:
        from mlkaps_gpu.cli._summary import stage_line

        for stage, details in summary.items():
            print(stage_line(stage, details))
        print(f"campaign '{config.name}' done in {seconds:.1f} s")
        print(f"header: {campaign.header_path}")
    _say_if_disturbed(campaign, as_json=as_json)
    return 0


def _say_if_disturbed(campaign: Any, *, as_json: bool) -> None:
    """Warn (stderr) when a share of the measurements was taken on a busy machine; with
    ``--json``, the load record as a line of its own (stdout) whenever there is one."""
    from mlkaps_gpu.campaign import campaign_interference
    from mlkaps_gpu.cli._summary import interference_warnings

    record = campaign_interference(campaign)
    if as_json and record is not None:
        print(json.dumps({"interference": record}))
    sys.stdout.flush()  # the warnings come after the summary, also in one shared stream
    for line in interference_warnings(record):
        print(f"mlkaps-gpu: warning: {line}", file=sys.stderr)


def _check_out(out: Path) -> None:
    """Refuse an ``--out`` that names (or lies under) something other than a directory."""
    from mlkaps_gpu.campaign import CampaignError

    for path in (out, *out.parents):
        if path.exists():
            if not path.is_dir():
                raise CampaignError(f"--out {out}: {path} exists and is not a directory")
            return


def _tune(args: argparse.Namespace) -> int:
    from mlkaps_gpu.campaign import load_config

    config = load_config(args.config)
    return _run_campaign(
        config,
        args.out,
        force=args.force,
        quiet=args.quiet,
        as_json=args.json,
        remeasure=args.remeasure,
    )


def _demo(args: argparse.Namespace) -> int:
    from mlkaps_gpu.campaign import parse_config
    from mlkaps_gpu.cli._demo import DEMO_CONFIG

    text = DEMO_CONFIG
    if args.budget is not None:
        if args.budget < 1:
            from mlkaps_gpu.campaign import ConfigError

            raise ConfigError(f"--budget: must be positive, got {args.budget}")
        text = text.replace("budget = 240", f"budget = {args.budget}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "demo.toml"
        path.write_text(text, encoding="utf-8")
        config = parse_config(text, path=path, label="demo.toml")
    if not args.quiet and not args.json:
        print(f"demo: tuning a blocked NumPy matrix product into {args.out}/")
    code = _run_campaign(config, args.out, force=False, quiet=args.quiet, as_json=args.json)
    if code == 0 and not args.quiet:
        _demo_gains(args.out, as_json=args.json)
    return code


def _demo_gains(out: Path, *, as_json: bool) -> None:
    """The header's answers at the demo sizes against every valid configuration measured
    there (fraction of the optimum) and a fixed default (speed-up), and the campaign report."""
    from mlkaps_gpu.cli._demo import DEMO_DEFAULT, DEMO_FUNCTION, DEMO_SIZES
    from mlkaps_gpu.cli._demo_speedup import describe, json_record, measure_sizes
    from mlkaps_gpu.cli._select import select_rows
    from mlkaps_gpu.validation import write_report

    answers = select_rows(out, [{"n": str(n)} for n in DEMO_SIZES])
    rows = measure_sizes(out, answers, DEMO_DEFAULT, DEMO_SIZES, DEMO_FUNCTION)
    default = ",".join(f"{key}={value}" for key, value in DEMO_DEFAULT.items())
    report = write_report(out, reference=default)  # the report's speed-up: over the same default
    if as_json:
        print(json.dumps(json_record(rows, DEMO_DEFAULT, report)))
        return
    for line in describe(rows, DEMO_DEFAULT):
        print(line)
    print(f"report with figures: {report}")


def _select(args: argparse.Namespace) -> int:
    from mlkaps_gpu.campaign import CampaignError
    from mlkaps_gpu.cli._select import (
        parse_assignments,
        read_inputs_csv,
        select_ranked_rows,
        select_rows,
        with_choices,
        write_answers_csv,
        write_ranked_csv,
    )

    if args.csv is None:
        rows = [parse_assignments(args.assignments)]
    elif args.assignments:
        raise CampaignError("select: give name=value inputs or --csv FILE, not both")
    elif str(args.csv) == "-":
        rows = read_inputs_csv(sys.stdin)
    else:
        try:
            with open(args.csv, newline="", encoding="utf-8") as handle:
                rows = read_inputs_csv(handle)
        except OSError as error:
            raise CampaignError(f"--csv {args.csv}: {error.strerror or error}") from None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ranked = (
            select_ranked_rows(args.directory, rows)
            if args.ranked
            else [[answer] for answer in select_rows(args.directory, rows)]
        )
    if args.as_choice:
        named = iter(with_choices(args.directory, [a for answers in ranked for a in answers]))
        ranked = [[next(named) for _ in answers] for answers in ranked]
    for warning in caught:
        print(f"mlkaps-gpu: warning: {_one_line(Exception(warning.message))}", file=sys.stderr)
    if args.ranked and args.csv is None:
        print(json.dumps(ranked[0]))
    elif args.ranked:
        write_ranked_csv(sys.stdout, rows, ranked)
    elif args.csv is None:
        print(json.dumps(ranked[0][0]))
    else:
        write_answers_csv(sys.stdout, rows, [answers[0] for answers in ranked])
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
