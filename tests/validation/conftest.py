"""The campaign fixtures (a kernel module on the path, config writer) are shared with the
validation tests."""

from tests.campaign.conftest import *  # noqa: F403
