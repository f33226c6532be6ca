"""``mlkaps-gpu check CONFIG``: validate a configuration without measuring anything.

Runs exactly the validation ``tune`` runs before it creates the campaign directory: the
configuration model, the space (parameters, constraints, grid) and the construction of the
executor (a Python kernel's module is imported, a replay's data files are read, a C kernel's
executor is set up), but no kernel is called, nothing is compiled or measured and nothing is
written. Exit status 0 with a one-line summary, or 2 with the problem (``ConfigError``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mlkaps_gpu.campaign import CampaignConfig, load_config, prepare


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``check`` command to ``subparsers``."""
    parser = subparsers.add_parser(
        "check", help="validate a TOML configuration without running anything"
    )
    parser.add_argument("config", type=Path, help="campaign configuration (TOML)")
    return parser


def check(path: Path) -> str:
    """Validate the configuration at ``path``; return its one-line summary.

    Raises:
        ConfigError: the first problem found.
    """
    config = load_config(path)
    setup = prepare(config)
    try:
        return summary(config, setup.space.input_names, setup.space.design_names)
    finally:
        setup.executor.close()


def summary(config: CampaignConfig, inputs: list[str], design: list[str]) -> str:
    """``OK lu.toml: campaign 'lu', cffi kernel, inputs m, n; design nb, ...; budget 1000``."""
    objectives = ", ".join(f"{n} ({d})" for n, d in config.objectives.items())
    return (
        f"OK {config.path.name}: campaign '{config.name}', {config.kernel.executor} kernel, "
        f"inputs {', '.join(inputs) or 'none'}; design {', '.join(design)}; "
        f"{len(config.constraints)} constraint(s); objectives {objectives}; "
        f"{config.sampling.method} sampling, budget {config.sampling.budget}"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``check``; a bad configuration raises ConfigError (exit status 2)."""
    print(check(args.config))
    return 0
