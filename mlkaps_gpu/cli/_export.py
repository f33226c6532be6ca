"""``mlkaps-gpu export``: one header with the selector of several campaigns (architectures).

Each campaign's fitted selector becomes one target of
:func:`mlkaps_gpu.trees.render_multi_header`, chosen at compile time with
``-DMLKAPS_TARGET_<NAME>`` or at run time by name. Target names default to the campaign names
(the directory names when those repeat); the prefix to the first campaign's ``[trees] prefix``.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from mlkaps_gpu._files import write_atomically
from mlkaps_gpu.campaign import Campaign, CampaignError, summary_line
from mlkaps_gpu.codegen import MultiTargetError, Target, render_multi_header, target_macro

log = logging.getLogger("mlkaps_gpu")


def _provenance(campaign: Campaign) -> dict[str, str]:
    lines = {"campaign": str(campaign.config.name)}
    environment = campaign.environment
    if environment:
        lines["measured_on"] = (
            "replayed data" if environment.get("replay") else summary_line(environment)
        )
        if environment.get("gpu_name"):
            lines["gpu"] = str(environment["gpu_name"])
    try:
        lines["samples_sha256"] = campaign.samples_digest()
    except Exception as error:  # noqa: BLE001 - provenance is best effort
        log.warning("%s: no sample hash for the header comment: %s", campaign.directory, error)
    return lines


def _default_names(campaigns: Sequence[Campaign]) -> list[str]:
    names = [str(c.config.name) for c in campaigns]
    if len({target_macro(n) for n in names}) == len(names):
        return names
    names = [c.directory.resolve().name for c in campaigns]
    if len({target_macro(n) for n in names}) == len(names):
        return names
    raise CampaignError(
        "campaign and directory names repeat: give one target name per campaign with --names"
    )


def export_header(
    directories: Sequence[str | Path],
    out: str | Path,
    *,
    names: Sequence[str] | None = None,
    prefix: str | None = None,
    default: str | None = None,
) -> Path:
    """Write the multi-target header of the campaigns in ``directories`` to ``out``.

    Raises:
        CampaignError: a directory is no finished campaign, the names do not match the
            directories, or the campaigns' parameters differ (the message names the parameter
            and the campaign).
    """
    if not directories:
        raise CampaignError("export: give at least one campaign directory with --targets")
    campaigns = [Campaign.open(directory, write=True) for directory in directories]
    for campaign in campaigns:
        if not campaign.done("trees"):
            raise CampaignError(
                f"{campaign.directory}: no fitted selector; run 'mlkaps-gpu tune' to the end"
            )
    if names is None:
        names = _default_names(campaigns)
    elif len(names) != len(campaigns):
        raise CampaignError(
            f"export: {len(names)} name(s) for {len(campaigns)} campaign(s); give one per target"
        )
    targets = [
        Target(
            name=name,
            selector=campaign.load_selector(),
            label=f"campaign '{campaign.config.name}' in {campaign.directory}",
            provenance=_provenance(campaign),
        )
        for name, campaign in zip(names, campaigns, strict=True)
    ]
    chosen = prefix if prefix is not None else campaigns[0].config.trees.prefix
    try:
        text = render_multi_header(targets, prefix=chosen, default=default)
    except (MultiTargetError, ValueError) as error:
        raise CampaignError(f"export: {error}") from error
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text, mode=0o600)  # the permissions mkstemp gave it
    return path


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``export`` on the ``mlkaps-gpu`` subcommands."""
    parser = subparsers.add_parser(
        "export",
        help="one header selecting between several campaigns' trees (one per architecture)",
    )
    parser.add_argument(
        "--targets", nargs="+", type=Path, required=True, metavar="DIR", help="campaign dirs"
    )
    parser.add_argument(
        "--names", nargs="+", default=None, metavar="NAME", help="target names (one per DIR)"
    )
    parser.add_argument("--prefix", default=None, help="symbol prefix (default: first campaign's)")
    parser.add_argument("--default", default=None, help="default target (default: the first)")
    parser.add_argument("--out", type=Path, required=True, help="header file to write")


def run(args: argparse.Namespace) -> int:
    """Run ``export``; errors raise :class:`CampaignError` (one line, exit status 2 in the CLI)."""
    path = export_header(
        args.targets, args.out, names=args.names, prefix=args.prefix, default=args.default
    )
    if not getattr(args, "quiet", False):
        print(f"export: wrote {path} ({len(args.targets)} targets)")
    return 0
