"""``mlkaps-gpu report``: one self-contained HTML report of a campaign."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mlkaps_gpu.campaign import CampaignError
from mlkaps_gpu.validation import DEFAULT_FOLDS, write_report


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``report`` command to ``subparsers``."""
    parser = subparsers.add_parser("report", help="one self-contained HTML report of a campaign")
    parser.add_argument("directory", type=Path, help="campaign directory")
    parser.add_argument("--out", type=Path, default=None, help="default: DIR/report.html")
    parser.add_argument(
        "--folds", type=int, default=DEFAULT_FOLDS, help="cross-validation folds (surrogate)"
    )
    parser.add_argument(
        "--reference",
        default=None,
        help="what the first section's speed-ups are measured against, as validate takes it: "
        "expert, name=value,..., a CSV table, module:function or a campaign directory "
        "(default: the kernel's expert default where it has one)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``report``; a directory that is no campaign raises CampaignError."""
    if args.folds < 2:
        raise CampaignError(f"--folds {args.folds}: need at least 2")
    path = write_report(args.directory, args.out, folds=args.folds, reference=args.reference)
    if not getattr(args, "quiet", False):
        print(f"report written to {path}")
    return 0
