"""Writing a file all or nothing (standard library only, no other module of mlkaps_gpu, so
that every layer, and the stdlib-only :mod:`mlkaps_gpu.user_cache`, may import it)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_atomically(
    path: str | Path, data: bytes | str, *, unique: bool = True, mode: int = 0o666
) -> None:
    """Write ``data`` to ``path`` all or nothing.

    The data (a ``str`` is encoded as UTF-8) goes into a temporary file in ``path``'s own
    folder (the same file system, so the rename is atomic), is flushed and fsync'ed to disk,
    then renamed over ``path`` with :func:`os.replace`: a reader, or a crash, sees the old
    file or the new one, never part of one. When anything fails the temporary file is
    removed and the error raised.

    Args:
        path: the file to write (its folder must exist).
        data: the whole content.
        unique: True: the temporary file is ``.<name>.<pid>.<random>.tmp``, created
            exclusively, so that processes or threads writing the same folder never share
            one. False: it is ``<name>.tmp`` (truncated if a crash left one), for a caller
            that holds the folder's lock and lists that name as its own (a campaign).
        mode: the permissions of the new file before the umask, as for :func:`os.open`
            (``0o666`` gives what ``open()`` gives; ``0o600`` keeps it private to the user).
    """
    path = Path(path)
    if unique:
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    else:
        temporary = path.with_name(f"{path.name}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    payload = data.encode("utf-8") if isinstance(data, str) else data
    descriptor = os.open(temporary, flags, mode)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
