"""What the hostile tests share: a user's folder with kernels, the command line run as a user
runs it, and the evidence that nothing was lost (row counts and checksums of the store)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: the kernels.py of the user folder (a file beside this one)
KERNELS = Path(__file__).with_name("kernels.py")

CONFIG = """\
[campaign]
name = "hostile"
seed = 1

[kernel]
executor = "python"
function = "kernels.py:{function}"
{kernel_extra}
[inputs]
n = {{ type = "int", range = [16, 4096], log = true }}
{inputs_extra}
[design]
block = {{ type = "int", values = [4, 8, 16, 32, 64, 128] }}
{design_extra}constraints = {constraints}

[sampling]
method = "lhs"
budget = {budget}
batch_size = {batch}
{sampling_extra}
[optimization]
grid = {grid}

[trees]
max_depth = 4
prefix = "hostile"
verify_inputs = 500
"""


@dataclass
class Folder:
    """A user's folder: kernels.py and configurations beside it (not on PYTHONPATH)."""

    path: Path

    def config(
        self,
        name: str = "campaign.toml",
        *,
        function: str = "model",
        budget: int = 40,
        batch: int = 10,
        constraints: str = '["block <= n"]',
        grid: str = "{ n = 8 }",
        kernel_extra: str = "",
        inputs_extra: str = "",
        design_extra: str = "",
        sampling_extra: str = "",
    ) -> Path:
        text = CONFIG.format(
            function=function,
            budget=budget,
            batch=batch,
            constraints=constraints,
            grid=grid,
            kernel_extra=kernel_extra,
            inputs_extra=inputs_extra,
            design_extra=design_extra,
            sampling_extra=sampling_extra,
        )
        path = self.path / name
        path.write_text(text)
        return path

    @property
    def calls(self) -> int:
        """Kernel calls so far (the kernels log every call)."""
        log = self.path / "calls.log"
        return len(log.read_text().splitlines()) if log.exists() else 0


def cli(*args: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``mlkaps-gpu ARGS`` as a user runs it (a new process, the user's folder as working
    directory, no PYTHONPATH pointing at the kernels)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, "-c", _ENTRY, "-q", *map(str, args)]
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def start_cli(*args: str | Path, cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, "-c", _ENTRY, "-q", *map(str, args)]
    return subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


_ENTRY = "import sys; from mlkaps_gpu.cli._main import main; sys.exit(main(sys.argv[1:]))"


def assert_refused(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit status 2, one line naming the problem, no traceback."""
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output, output
    errors = [line for line in result.stderr.splitlines() if line.startswith("mlkaps-gpu: error:")]
    assert len(errors) == 1, output
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def assert_clean(result: subprocess.CompletedProcess[str]) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Traceback" not in output, output


def store_rows(directory: Path) -> list[tuple[object, ...]]:
    """Every stored measurement (without the timestamp), read without changing the file (none
    while the campaign has created the file but not yet its table)."""
    uri = f"file:{directory / 'samples.sqlite'}?mode=ro"
    connection = sqlite3.connect(uri, uri=True)
    try:
        columns = [r[1] for r in connection.execute("PRAGMA table_info(samples)")]
        if not columns:
            return []
        kept = ", ".join(f'"{c}"' for c in columns if c != "timestamp")
        return connection.execute(f"SELECT {kept} FROM samples ORDER BY id").fetchall()  # noqa: S608
    finally:
        connection.close()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
