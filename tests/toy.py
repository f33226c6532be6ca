"""Helpers the test folders share: toy campaigns tuned once per test session (the
``toy_campaign`` fixture of conftest.py), figures built without being rendered, and the size of
a fuzz corpus under the hypothesis profile."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

from mlkaps_gpu.testing import write_config, write_toy_kernel


@contextmanager
def importable(folder: Path) -> Iterator[None]:
    """Modules of ``folder`` importable here and in worker processes while the block runs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(folder))
        patch.setenv("PYTHONPATH", str(folder) + ":" + ":".join(sys.path))
        yield


class ToyCampaigns:
    """Toy campaigns (:func:`mlkaps_gpu.testing.write_config`) tuned by ``mlkaps-gpu tune`` once
    per session and (budget, method, batch)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kernel = root / "kernel"
        self.kernel.mkdir()
        write_toy_kernel(self.kernel)
        self._tuned: dict[tuple[int, str, int], Path] = {}

    def tuned(self, *, budget: int = 60, method: str = "lhs", batch: int = 20) -> Path:
        """The finished campaign's directory; a test must not change it (see :meth:`copy`)."""
        key = (budget, method, batch)
        if key not in self._tuned:
            from mlkaps_gpu.cli import main

            name = f"toy_{budget}_{method}_{batch}"
            folder = self.root / f"{name}_config"
            folder.mkdir()
            config = write_config(folder, budget=budget, method=method, batch=batch)
            out = self.root / name
            with importable(self.kernel):
                code = main(["--quiet", "tune", str(config), "--out", str(out)])
            assert code == 0, f"tuning the toy campaign {name} failed"
            self._tuned[key] = out
        return self._tuned[key]

    def copy(
        self, destination: Path, *, budget: int = 60, method: str = "lhs", batch: int = 20
    ) -> Path:
        """A copy of :meth:`tuned` at ``destination``, for a test that changes the campaign."""
        shutil.copytree(self.tuned(budget=budget, method=method, batch=batch), destination)
        return destination


#: What a PNG file starts with.
PNG = b"\x89PNG\r\n\x1a\n"


def stub_rendering(patch: pytest.MonkeyPatch) -> None:
    """Figures are built but not rendered (rendering is tested where it matters:
    tests/analysis/test_report_figures.py and the browser test)."""
    from mlkaps_gpu.analysis import _plots

    def header_only(figure: object) -> bytes:
        _plots._pyplot().close(figure)
        return PNG + b"stub"

    patch.setattr(_plots, "_png", header_only)


def corpus(seeds: range) -> range:
    """A fuzz corpus of ``seeds``: all of it under the hypothesis profile ``ci-full`` (the second
    pass of .ci/run), its first quarter in the default run (profile ``quick``)."""
    full = settings.get_profile("ci-full").max_examples
    return seeds if settings.default.max_examples >= full else seeds[: len(seeds) // 4]
