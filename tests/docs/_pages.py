"""The code blocks of the README and of docs/, and a small runner for the tutorials' commands.

Conventions the pages follow (docs/index.md, "This site"):

* a block whose first line is ``# file: NAME`` (``// file: NAME`` in C) is a file of the page:
  the tutorial tests write it to a temporary folder under that name;
* a TOML block whose first line is ``# fragment`` is a partial configuration: it only parses;
* ``bash`` blocks of a tutorial are run line by line (``export``, ``mlkaps-gpu``, ``cc`` and
  ``./program`` only); ``console`` blocks show a session (``$ command`` and its output) and
  are only parsed.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
TUTORIALS = DOCS / "tutorials"
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
_FILE = re.compile(r"^\s*(?:#|//)\s*file:\s*(?P<name>\S+)\s*$")
_SEPARATORS = {"&&", "||", ";", "|"}


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language and its text (indentation removed)."""

    page: Path
    line: int
    lang: str
    text: str

    @property
    def label(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def first_line(self) -> str:
        lines = self.text.strip().splitlines()
        return lines[0].strip() if lines else ""

    @property
    def file_name(self) -> str | None:
        """The name given by a first line ``# file: NAME``, if any."""
        match = _FILE.match(self.first_line)
        return match.group("name") if match else None


def pages() -> list[Path]:
    """The README and every Markdown page under docs/."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = len(opening.group("indent")), opening.group("fence")
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(fence):
            body.append(lines[index][indent:] if lines[index][:indent].isspace() else lines[index])
            index += 1
        start = index - len(body)
        found.append(Block(page, start, opening.group("lang").lower(), "\n".join(body) + "\n"))
        index += 1
    return found


def all_blocks(*langs: str) -> list[Block]:
    """Every block of the given languages in every page."""
    return [b for page in pages() for b in blocks(page) if b.lang in langs]


def page_files(page: Path) -> dict[str, str]:
    """The files a page defines (blocks whose first line is ``# file: NAME``)."""
    files: dict[str, str] = {}
    for block in blocks(page):
        name = block.file_name
        if name is not None:
            assert name not in files, f"{block.label}: {name} is defined twice in the page"
            files[name] = block.text
    return files


def write_files(page: Path, folder: Path) -> dict[str, Path]:
    """Write the page's files into ``folder``; return name -> path."""
    written = {}
    for name, text in page_files(page).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written[name] = path
    return written


def commands(block: Block) -> list[list[str]]:
    """The commands of a shell block: one argv per command (``&&``, ``;`` and pipes split them,
    ``\\`` continues a line, comments are dropped; in a ``console`` block only ``$ `` lines)."""
    logical: list[str] = []
    pending = ""
    for raw in block.text.splitlines():
        line = raw.rstrip()
        if block.lang == "console" and not pending:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    found: list[list[str]] = []
    for line in logical:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        for token in lexer:
            if token in _SEPARATORS:
                found.append(current)
                current = []
            else:
                current.append(token)
        found.append(current)
    return [argv for argv in found if argv]


def split_environment(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading ``NAME=value`` assignments of a command, and the command itself."""
    environment: dict[str, str] = {}
    index = 0
    while index < len(argv) and re.fullmatch(r"[A-Za-z_]\w*=.*", argv[index]):
        name, _, value = argv[index].partition("=")
        environment[name] = value
        index += 1
    return environment, argv[index:]


@dataclass
class Step:
    """One command a tutorial ran and what it printed."""

    argv: list[str]
    stdout: str


@contextlib.contextmanager
def inside(folder: Path, paths: list[str], environment: dict[str, str]) -> Iterator[None]:
    """Run in ``folder`` as a command started there would: ``paths`` (``PYTHONPATH``) first on
    ``sys.path``, ``environment`` set; afterwards every module imported from ``folder`` is
    forgotten (the next page may define another ``kernels.py``)."""
    cwd, saved_path, saved_environ = os.getcwd(), list(sys.path), dict(os.environ)
    modules = set(sys.modules)
    os.chdir(folder)
    sys.path[:0] = [str((folder / p).resolve()) for p in paths]
    os.environ.update(environment)
    importlib.invalidate_caches()
    try:
        yield
    finally:
        os.chdir(cwd)
        sys.path[:] = saved_path
        os.environ.clear()
        os.environ.update(saved_environ)
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(folder)):
                del sys.modules[name]


def run_command(argv: list[str], folder: Path, timeout: float = 300) -> Step:
    """Run one tutorial command in ``folder``: ``mlkaps-gpu`` (this checkout's, in this process,
    as ``main(argv)``), ``cc`` or a program the page built (``./name``); anything else is refused
    (a page must not ask the test to install or download). A failure raises AssertionError with
    the command's output."""
    from mlkaps_gpu.cli import main

    assignments, command = split_environment(argv)
    paths = [p for p in assignments.pop("PYTHONPATH", "").split(os.pathsep) if p]
    program = command[0]
    if program == "mlkaps-gpu":
        out, err = io.StringIO(), io.StringIO()
        with inside(folder, paths, assignments):
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(command[1:])
        assert code == 0, f"{shlex.join(argv)} exited with {code}\n{out.getvalue()}{err.getvalue()}"
        return Step(argv, out.getvalue())
    if not (program in {"cc", "gcc"} or program.startswith("./")):
        raise AssertionError(f"the tutorial runner does not run {program!r} ({shlex.join(argv)})")
    done = subprocess.run(
        command,
        cwd=folder,
        env={**os.environ, **assignments},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"{shlex.join(argv)} exited with {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    return Step(argv, done.stdout)


def mlkaps_gpu_process(
    *args: str | Path, cwd: Path, cache: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """The installed ``mlkaps-gpu`` command (this interpreter's), as a user runs it: a new
    process in ``cwd``, no PYTHONPATH, its own compilation cache ``cache``."""
    script = Path(sys.executable).parent / "mlkaps-gpu"
    entry = "import sys; from mlkaps_gpu.cli import main; sys.exit(main(sys.argv[1:]))"
    command = [str(script)] if script.is_file() else [sys.executable, "-c", entry]
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environment["MLKAPS_GPU_CACHE"] = str(cache)
    return subprocess.run(
        [*command, *map(str, args)],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_page(page: Path, folder: Path) -> list[Step]:
    """Write the page's files into ``folder`` and run its ``bash`` blocks' commands in order
    (``export NAME=value`` holds for the page's later commands; ``$PWD`` is ``folder``)."""
    write_files(page, folder)
    exported: list[str] = []
    steps = []
    for block in blocks(page):
        if block.lang != "bash":
            continue
        for argv in commands(block):
            argv = [a.replace("${PWD}", str(folder)).replace("$PWD", str(folder)) for a in argv]
            if argv[0] == "export":
                exported += argv[1:]
                continue
            steps.append(run_command([*exported, *argv], folder))
    return steps


def run_python(block: Block, folder: Path) -> str:
    """Run a Python block as a script in ``folder`` would run (the folder first on
    ``sys.path``), in this process; return what it printed."""
    out = io.StringIO()
    with inside(folder, ["."], {}), contextlib.redirect_stdout(out):
        exec(compile(block.text, block.label, "exec"), {"__name__": "__main__"})  # noqa: S102
    return out.getvalue()
