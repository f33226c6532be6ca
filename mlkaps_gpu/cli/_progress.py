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
    """Print caught warnings on one line each, on stderr."""
    for warning in caught:
        text = " ".join(str(warning.message).split())
        print(f"mlkaps-gpu: warning: {text}", file=sys.stderr)
