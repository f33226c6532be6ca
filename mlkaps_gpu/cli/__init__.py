"""The ``mlkaps-gpu`` command line: parse arguments, call the public API, print, map errors to
exit codes (2 for bad input). Nothing imports this package; it imports only public names."""

from mlkaps_gpu.cli._main import main

__all__ = ["main"]
