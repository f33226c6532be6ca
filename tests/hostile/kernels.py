"""The user's kernels.py of the hostile tests: ``folder`` (conftest.py) copies this file into
each test's user folder, and experiments/hostile_kernels.py into its own. Every kernel logs
its call to calls.log beside the copy (``Folder.calls`` counts them).
"""

import math
import os
import signal
import time
from pathlib import Path

CALLS = Path(__file__).with_name("calls.log")


def _log(row):
    with open(CALLS, "a") as handle:
        handle.write(f"{row}\n")


def _value(row):
    return math.log(row["block"] / math.sqrt(row["n"])) ** 2 + row["n"] / 1000.0 + 0.1


def model(row):
    _log(row)
    return _value(row)


def slow(row):
    time.sleep(0.3)
    return model(row)


def held(row):
    """Like ``model``, but each call waits until the test creates ``release`` beside this file
    (at most 50 s, under the executor's default timeout of 60 s): the campaign is still running
    while the test starts other commands."""
    release = CALLS.with_name("release")
    deadline = time.monotonic() + 50
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return model(row)


def always_fails(row):
    _log(row)
    raise RuntimeError(f"the device is not there (n = {row['n']})")


def always_nan(row):
    _log(row)
    return float("nan")


def always_segfaults(row):
    _log(row)
    os.kill(os.getpid(), signal.SIGSEGV)


def impossible_times(row):
    _log(row)
    kind = (row["n"] + row["block"]) % 5
    value = _value(row)
    return {0: 0.0, 1: -value, 2: float("inf")}.get(kind, value)


def _bad(row):
    return (row["n"] * 7 + row["block"]) % 3 == 0


def crash_a_third(row):
    """One configuration in three: segfault, os._exit, hang or memory hog (by n)."""
    _log(row)
    if _bad(row):
        how = row["n"] % 4
        if how == 0:
            os.kill(os.getpid(), signal.SIGSEGV)
        if how == 1:
            os._exit(7)
        if how == 2:
            time.sleep(3600)
        blocks = []
        while True:
            blocks.append(bytearray(32 << 20))
    return _value(row)
