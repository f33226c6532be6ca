"""``mlkaps-gpu validate``: measured speedups of a campaign's header over a reference."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import Any

from mlkaps_gpu.campaign import Campaign, EnvironmentMismatchWarning
from mlkaps_gpu.cli._progress import Progress, report_warnings
from mlkaps_gpu.validation import (
    DEFAULT_ALPHA,
    DEFAULT_REPEATS,
    parse_grid,
    resolve_reference,
    validate,
    write_validation,
)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--grid", default="32", help="validation grid: 32x32, 32 or m=32,n=16")
    parser.add_argument(
        "--repeats", type=int, default=DEFAULT_REPEATS, help="measurements per configuration"
    )
    parser.add_argument(
        "--alpha", type=float, default=DEFAULT_ALPHA, help="false discovery rate of the test"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the noise estimate")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``validate`` command to ``subparsers``."""
    parser = subparsers.add_parser(
        "validate", help="measure the header's configurations against a reference"
    )
    parser.add_argument("directory", type=Path, help="campaign directory")
    parser.add_argument(
        "--reference",
        default="expert",
        help="expert | name=value,... | table.csv | module:function | campaign directory",
    )
    add_common_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``validate``; a bad directory, reference or grid raises CampaignError."""
    campaign = Campaign.open(args.directory, write=True)
    progress = Progress(bool(getattr(args, "quiet", False)))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", EnvironmentMismatchWarning)
            reference = resolve_reference(args.reference, campaign)
            sizes = parse_grid(args.grid, campaign.sampling_space)
            validation = validate(
                campaign,
                reference,
                sizes=sizes,
                repeats=args.repeats,
                alpha=args.alpha,
                seed=args.seed,
                progress=progress,
            )
        report_warnings(caught)
        folder = campaign.directory / "validation"
        write_validation(validation, folder, campaign.space)
    finally:
        progress.close()
        campaign.setup.executor.close()
    if not getattr(args, "quiet", False):
        print(validation.describe())
        print(f"written to {folder}/")
    return 0
