"""Progress bars and warnings for the command line (the only place that prints for users)."""

from __future__ import annotations

import sys
import warnings
from typing import Any


class Progress:
    """tqdm bars per stage (silent with --quiet)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bars: dict[str, Any] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.quiet:
            return
        from tqdm import tqdm

        bar = self.bars.get(stage)
        if bar is None or bar.total != total:
            if bar is not None:
                bar.close()
            unit = "eval" if stage == "sampling" else "step"
            bar = self.bars[stage] = tqdm(total=total, desc=stage, unit=unit, leave=True)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def report_warnings(caught: list[warnings.WarningMessage]) -> None:
    """Print caught warnings on stderr, each wrapped at words to the terminal's width."""
    from mlkaps_gpu.cli._summary import WARNING_PREFIX, wrap

    for warning in caught:
        print(wrap(str(warning.message), first=WARNING_PREFIX, indent=2), file=sys.stderr)
