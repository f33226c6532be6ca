"""Tests of the documentation: every code block of the README and docs/, and the tutorials."""
