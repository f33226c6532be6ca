"""``mlkaps-gpu export-cache``: a campaign's measurements at one input point as a Kernel Tuner
cache file (``mlkaps-gpu export-cache runs/conv gpu=A100 --out A100.json``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from mlkaps_gpu._files import write_atomically
from mlkaps_gpu.campaign import Campaign, CampaignError
from mlkaps_gpu.executors import kernel_tuner_cache
from mlkaps_gpu.space import parse_value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``export-cache`` command to ``subparsers``."""
    parser = subparsers.add_parser(
        "export-cache",
        help="write a campaign's measurements at one input point as a Kernel Tuner cache",
    )
    parser.add_argument("directory", type=Path, help="campaign directory")
    parser.add_argument(
        "assignments",
        nargs="*",
        metavar="name=value",
        help="the input point (e.g. gpu=A100); every input measured at several values needs one",
    )
    parser.add_argument("--out", type=Path, required=True, help="the cache file to write (JSON)")
    parser.add_argument("--kernel-name", default=None, help="default: the campaign name")
    parser.add_argument(
        "--device-name", default=None, help="default: the input values given (e.g. A100)"
    )
    parser.add_argument(
        "--problem-size",
        type=int,
        nargs="*",
        default=None,
        help="Kernel Tuner's problem size (default: the numeric input values given)",
    )
    return parser


def _rows_at_point(campaign: Campaign, assignments: dict[str, str]) -> Any:
    """The stored measurements at the input point the assignments (and the data) fix."""
    space = campaign.space
    unknown = sorted(set(assignments) - set(space.input_names))
    if unknown:
        raise CampaignError(f"export-cache: {unknown} are not inputs (inputs: {space.input_names})")
    table = campaign.store.load()
    for parameter in space.inputs:
        if parameter.name in assignments:
            value = parse_value(parameter, assignments[parameter.name])
            table = table[table[parameter.name] == value]
            continue
        measured = sorted({str(v) for v in table[parameter.name].unique()})
        if len(measured) > 1:
            shown = ", ".join(measured[:6]) + (", ..." if len(measured) > 6 else "")
            raise CampaignError(
                f"export-cache: input {parameter.name} was measured at {len(measured)} values "
                f"({shown}); choose one with {parameter.name}=VALUE"
            )
    if table.empty:
        raise CampaignError(f"export-cache: no measurement at {assignments or 'this point'}")
    return table


def _problem_size(
    given: list[int] | None, campaign: Campaign, assignments: dict[str, str]
) -> list[int]:
    if given is not None:
        return given
    numeric = [p for p in campaign.space.inputs if p.kind == "int" and p.name in assignments]
    return [int(parse_value(p, assignments[p.name])) for p in numeric]


def run(args: argparse.Namespace) -> int:
    """Run ``export-cache``; a bad directory or input point raises CampaignError."""
    assignments: dict[str, str] = {}
    for text in args.assignments:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise CampaignError(f"export-cache: '{text}': expected name=value")
        assignments[name.strip()] = value.strip()
    campaign = Campaign.open(args.directory)
    try:
        rows = _rows_at_point(campaign, assignments)
    finally:
        campaign.setup.executor.close()
    space = campaign.space
    document = kernel_tuner_cache(
        rows,
        {p.name: list(np.asarray(p.domain_values()).tolist()) for p in space.design},
        campaign.setup.objectives[0],
        device_name=args.device_name or "_".join(assignments.values()) or "unknown",
        kernel_name=args.kernel_name or str(campaign.config.name),
        problem_size=_problem_size(args.problem_size, campaign, assignments),
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out, json.dumps(document, indent=1), mode=0o600)  # as mkstemp made it
    if not getattr(args, "quiet", False):
        print(f"{len(document['cache'])} configurations written to {out}")
    return 0
