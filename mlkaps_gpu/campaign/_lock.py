"""One writer per campaign directory: an exclusive lock on ``<directory>/.lock``.

Every command that writes a campaign directory (``tune`` and its resume, ``validate``, ``merge``,
``export``) holds the lock for as long as it runs; a second writer is refused at once with the
holder's process id. The lock is :func:`fcntl.flock` on an open file, so the kernel releases it
when its holder ends, however it ends (``kill -9`` included): there is no stale lock to clean.
Readers (``select``, ``report``) never take it and never wait: the store is SQLite in WAL mode,
where readers see the last committed batch while a writer appends.

Within one process the lock is counted: opening the same campaign twice for writing (a test, or
``validate`` after ``tune`` in one script) shares one lock.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

#: The lock file, inside the campaign directory.
LOCK_NAME = ".lock"


class LockHeldError(RuntimeError):
    """Another process writes the campaign directory.

    Attributes:
        holder: the process id the lock file names (None when it could not be read).
    """

    def __init__(self, directory: Path, holder: int | None) -> None:
        who = f"process {holder}" if holder is not None else "another process"
        super().__init__(
            f"{directory}: {who} is writing this campaign (lock {directory / LOCK_NAME}); "
            "wait for it to finish, or stop it, then run the command again"
        )
        self.holder = holder


# directory -> (file descriptor, holders in this process)
_HELD: dict[Path, tuple[int, int]] = {}


class CampaignLock:
    """The writer lock of one campaign directory (the directory must exist).

    Use :meth:`acquire` / :meth:`release`, or ``with CampaignLock(directory):``.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).resolve()
        self.held = False

    def acquire(self) -> None:
        """Take the lock, or raise :class:`LockHeldError` at once (never waits)."""
        if self.held:
            return
        entry = _HELD.get(self.directory)
        if entry is not None:
            _HELD[self.directory] = (entry[0], entry[1] + 1)
            self.held = True
            return
        path = self.directory / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise LockHeldError(self.directory, holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[self.directory] = (fd, 1)
        self.held = True

    def release(self) -> None:
        """Give the lock back (the last holder in this process unlocks). Safe to call twice."""
        if not self.held:
            return
        self.held = False
        fd, count = _HELD.pop(self.directory)
        if count > 1:
            _HELD[self.directory] = (fd, count - 1)
            return
        os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> CampaignLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None


def lock_holder(directory: str | Path) -> int | None:
    """The process id written in a campaign's lock file (None: none, or unreadable); the lock
    may be free (its holder ended)."""
    try:
        fd = os.open(Path(directory) / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _read_pid(fd)
    finally:
        os.close(fd)
