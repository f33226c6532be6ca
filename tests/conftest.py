"""Test-suite wide settings and the fixtures every folder shares.

Hypothesis: the default run checks each property on a few derandomized examples (profile
``quick``); ``.ci/run`` runs the property tests again with ``--hypothesis-profile=ci-full``.

Toy campaigns: tuning one takes seconds, so the ``toy_campaign`` fixture
(:class:`tests.toy.ToyCampaigns`) tunes each (budget, method, batch) once per session; a test
reads the tuned directory, or works on its own copy (``toy_campaign.copy(tmp_path / "x")``)
where it changes it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import settings

from mlkaps_gpu.testing import write_toy_kernel
from tests.toy import ToyCampaigns, stub_rendering
from tests.trees.synthetic import (  # noqa: F401 (the tree and header tests' fixtures)
    checked_selector,
    constrained,
    density_selector,
    joint_selector,
    optima,
    optima_with_density,
    params,
    selector,
    strict_c,
    strict_cxx,
    tiny_model,
)

# Property tests draw the same examples on every run (and keep no example database), so that a
# run is reproducible; a failure found once is added as an explicit test case.
settings.register_profile("quick", derandomize=True, database=None, max_examples=20)
settings.register_profile("ci-full", derandomize=True, database=None, max_examples=500)


def pytest_configure(config: pytest.Config) -> None:
    settings.load_profile(config.getoption("hypothesis_profile", None) or "quick")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.property)


@pytest.fixture
def kernel_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding the toy kernel module ``toy_kernel``, on the path for this test."""
    folder = tmp_path / "kernel"
    folder.mkdir()
    write_toy_kernel(folder)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder) + ":" + ":".join(sys.path))
    sys.modules.pop("toy_kernel", None)
    return folder


@pytest.fixture(scope="session")
def _toy_campaigns(tmp_path_factory: pytest.TempPathFactory) -> ToyCampaigns:
    return ToyCampaigns(tmp_path_factory.mktemp("toy_campaigns"))


@pytest.fixture
def toy_campaign(_toy_campaigns: ToyCampaigns, kernel_path: Path) -> ToyCampaigns:
    """The session's tuned toy campaigns, with the toy kernel on the path for this test."""
    return _toy_campaigns


@pytest.fixture
def quick_png(monkeypatch: pytest.MonkeyPatch) -> None:
    """Figures are built but not rendered into PNG (see :func:`tests.toy.stub_rendering`)."""
    stub_rendering(monkeypatch)
