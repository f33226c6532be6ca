"""The tree fixtures (synthetic optima, fitted selectors, strict compiler flags) are shared with
the header tests."""

from tests.trees.conftest import *  # noqa: F403
