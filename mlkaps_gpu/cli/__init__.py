"""The ``mlkaps-gpu`` command line: parse arguments, call the public API, print, map errors to
exit codes (2 for bad input). Nothing imports this package; it imports only public names."""

# the built-in demo's config and its default configuration (the demo's baseline), for experiments
from mlkaps_gpu.cli._demo import DEMO_CONFIG, DEMO_DEFAULT
from mlkaps_gpu.cli._main import main

__all__ = ["DEMO_CONFIG", "DEMO_DEFAULT", "main"]
