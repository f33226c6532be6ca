"""Done-when 3 of issue 19, measured: two concurrent ``tune`` on one directory, and a Python
kernel that segfaults, calls os._exit, hangs past its timeout or allocates past its memory cap
on a third of its configurations.

    python experiments/hostile_kernels.py [--budget 60] [--timeout 2]

Prints a markdown table: who was refused and how fast, rows by status, and the campaign's wall
time against ``timeout x failing rows + 20 %``. The kernels are the hostile tests' own
(tests/hostile/kernels.py), so run it from a checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchkit.provenance import header, provenance

#: the hostile tests' kernels.py (``slow`` sleeps 0.3 s; every kernel logs its call to calls.log)
KERNELS = Path(__file__).resolve().parent.parent / "tests" / "hostile" / "kernels.py"

CONFIG = """\
[kernel]
executor = "python"
function = "kernels.py:{function}"
timeout = {timeout}
memory_limit = 300

[inputs]
n = {{ type = "int", range = [16, 4096], log = true }}

[design]
block = {{ type = "int", values = [4, 8, 16, 32, 64, 128] }}
constraints = ["block <= n"]

[sampling]
method = "lhs"
budget = {budget}
batch_size = 10

[optimization]
grid = {{ n = 8 }}

[trees]
max_depth = 4
prefix = "hostile"
"""
ENTRY = "import sys; from mlkaps_gpu.cli import main; sys.exit(main(sys.argv[1:]))"


def _command(*args: str | Path) -> list[str]:
    return [sys.executable, "-c", ENTRY, "-q", *map(str, args)]


def _statuses(out: Path) -> Counter[str]:
    connection = sqlite3.connect(f"file:{out / 'samples.sqlite'}?mode=ro", uri=True)
    try:
        return Counter(row[0] for row in connection.execute("SELECT status FROM samples"))
    finally:
        connection.close()


def concurrent_tunes(folder: Path, budget: int, timeout: float) -> list[str]:
    config = folder / "slow.toml"
    config.write_text(CONFIG.format(function="slow", timeout=timeout, budget=budget))
    out = folder / "concurrent"
    first = subprocess.Popen(_command("tune", config, "--out", out), cwd=folder, text=True)
    lock = out / ".lock"
    while not (lock.exists() and lock.read_text().strip() == str(first.pid)):
        time.sleep(0.05)
    began = time.perf_counter()
    second = subprocess.run(
        _command("tune", config, "--out", out), cwd=folder, capture_output=True, text=True
    )
    refused_in = time.perf_counter() - began
    first.wait()
    rows = sum(_statuses(out).values())
    message = second.stderr.strip().splitlines()[-1] if second.stderr.strip() else ""
    return [
        f"| second tune | exit {second.returncode} after {refused_in:.1f} s: {message} |",
        f"| first tune | exit {first.returncode}, {rows} rows for a budget of {budget} |",
    ]


def crashing_kernel(folder: Path, budget: int, timeout: float) -> list[str]:
    config = folder / "crash.toml"
    config.write_text(CONFIG.format(function="crash_a_third", timeout=timeout, budget=budget))
    out = folder / "crash"
    began = time.perf_counter()
    result = subprocess.run(
        _command("tune", config, "--out", out), cwd=folder, capture_output=True, text=True
    )
    wall = time.perf_counter() - began
    statuses = _statuses(out)
    failing = sum(n for status, n in statuses.items() if status != "ok")
    sampling = json.loads((out / "campaign.json").read_text())["details"]["sampling"]
    bound = 1.2 * timeout * failing
    return [
        f"| campaign | exit {result.returncode}, rows {dict(sorted(statuses.items()))} |",
        f"| failing rows | {failing} of {sum(statuses.values())} |",
        f"| sampling wall time | {sampling['wall_seconds']:.1f} s |",
        f"| whole campaign wall time | {wall:.1f} s (4 stages and the process start) |",
        f"| timeout x failing rows + 20 % | {bound:.1f} s |",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        shutil.copyfile(KERNELS, folder / "kernels.py")
        env_note = f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
        print(header(provenance(), markdown=True))
        print(f"# issue 19, Done-when 3 ({env_note})\n")
        print("| two tunes on one directory | |\n|---|---|")
        print("\n".join(concurrent_tunes(folder, args.budget, args.timeout)))
        print(f"\n| kernel failing on a third of its rows, timeout {args.timeout:g} s | |")
        print("|---|---|")
        print("\n".join(crashing_kernel(folder, args.budget, args.timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
