"""The validation tests' shared campaign: the paired kernel's, tuned once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from .paired import kernel_on_path, make_campaign


@pytest.fixture(scope="session")
def paired_tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder where :func:`make_campaign` tuned the paired campaign (budget 80); modules
    open copies of it (:func:`copied_campaign`)."""
    folder = tmp_path_factory.mktemp("paired")
    for _ in kernel_on_path(folder):
        make_campaign(folder).close()
    return folder
