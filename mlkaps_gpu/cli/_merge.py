"""``mlkaps-gpu merge``: keep the tuned configuration only where it beats an expert's."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import Any

from mlkaps_gpu.campaign import Campaign, EnvironmentMismatchWarning
from mlkaps_gpu.cli._progress import Progress, report_warnings
from mlkaps_gpu.cli._validate import add_common_arguments
from mlkaps_gpu.trees import MODES
from mlkaps_gpu.validation import (
    DEFAULT_HEADROOM_NEIGHBOURS,
    DEFAULT_HEADROOM_POINTS,
    MERGE_DIR,
    HeadroomSettings,
    Validation,
    describe_merge,
    merge,
    parse_grid,
    reassess,
    resolve_reference,
    write_merge,
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``merge`` command to ``subparsers``."""
    parser = subparsers.add_parser(
        "merge", help="keep the tuned configuration only where it beats an expert's; new header"
    )
    parser.add_argument("directory", type=Path, help="campaign directory")
    parser.add_argument(
        "--expert",
        required=True,
        help="expert | name=value,... | table.csv | module:function | campaign directory",
    )
    add_common_arguments(parser)
    parser.add_argument(
        "--mode", choices=list(MODES), default=None, help="tree mode (default: joint if offered)"
    )
    parser.add_argument(
        "--max-depth",
        type=_depth,
        default="auto",
        help="depth of the merged tree (default auto: least regret over 1..12)",
    )
    parser.add_argument(
        "--from-validation",
        action="store_true",
        help="decide from DIR/validation (a validate run against the same expert) instead of "
        "measuring again",
    )
    parser.add_argument(
        "--headroom-points",
        type=int,
        default=DEFAULT_HEADROOM_POINTS,
        help="validation points where a local search around the expert measures the headroom "
        "(0: none)",
    )
    parser.add_argument(
        "--headroom-neighbours",
        type=int,
        default=DEFAULT_HEADROOM_NEIGHBOURS,
        help="valid one-parameter neighbours of the expert measured per headroom point",
    )
    return parser


def _depth(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer or auto, not {text!r}"
        ) from None


def run(args: argparse.Namespace) -> int:
    """Run ``merge``; a bad directory, expert or grid raises CampaignError."""
    campaign = Campaign.open(args.directory, write=True)
    progress = Progress(bool(getattr(args, "quiet", False)))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", EnvironmentMismatchWarning)
            expert = resolve_reference(args.expert, campaign)
            before = None
            if args.from_validation:
                loaded = Validation.load(campaign.directory / "validation")
                before = reassess(loaded, campaign.space, alpha=args.alpha, seed=args.seed)
            sizes = parse_grid(args.grid, campaign.sampling_space)
            result = merge(
                campaign,
                expert,
                sizes=sizes,
                before=before,
                repeats=args.repeats,
                alpha=args.alpha,
                seed=args.seed,
                mode=args.mode,
                max_depth=args.max_depth,
                headroom=HeadroomSettings(
                    args.headroom_points, args.headroom_neighbours, seed=args.seed
                ),
                progress=progress,
            )
        report_warnings(caught)
        write_merge(result, campaign.directory / MERGE_DIR, campaign.space)
    finally:
        progress.close()
        campaign.setup.executor.close()
    if not getattr(args, "quiet", False):
        print(describe_merge(result.summary))
        shipped = result.header if result.header is not None else "no header: the expert ships"
        print(f"written to {campaign.directory / MERGE_DIR}/; {shipped}")
    return 0
