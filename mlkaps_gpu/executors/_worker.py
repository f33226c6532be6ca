"""The measurement worker process: ``python -m mlkaps_gpu.executors._worker``.

Kernels run here, never in the campaign's process: a segfault, an abort or an endless loop ends
this process only, and the parent (:class:`~mlkaps_gpu.executors._worker_handle.WorkerHandle`)
records the row and starts a new worker.

Protocol (over the process's original stdin / stdout, which the worker takes for itself at
start; file descriptor 1 is then pointed at stderr so that a kernel's ``printf`` cannot corrupt
the protocol): each message is an 8-byte little-endian length followed by a pickled ``dict``.

* parent -> worker ``{"kind": "configure", "sys_path": [...], "runner": "module:attr",
  "config": <pickled bytes>}`` (the parent's ``sys.path``, which becomes the worker's, in
  the same order: see :func:`install_path`); reply ``{"kind": "ready"}`` or
  ``{"kind": "error", "message"}``.
  The runner factory is called with the unpickled config and returns an object with a
  ``measure(request: dict, progress) -> dict`` method, ``progress(what, timeout_s=None)``.
* parent -> worker ``{"kind": "measure", "request": {...}}``; the worker sends
  ``{"kind": "progress", "what": ..., "timeout": seconds or None}`` before every step that could
  hang (the parent's per-step timeout restarts at each message, with the step's own timeout
  when one is given), then ``{"kind": "result", "result": {...}}``; a result with
  ``"restart": True`` asks the parent to replace the worker (e.g. a broken CUDA context).
* parent -> worker ``{"kind": "exit"}``, or end of input: the worker exits.

A watchdog thread ends the worker when its parent process is gone (an orphaned worker stuck in
a kernel would otherwise spin on forever).
"""

from __future__ import annotations

import importlib
import os
import pickle
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO

_HEADER = struct.Struct("<Q")


def write_message(stream: BinaryIO, message: dict[str, Any]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(stream: BinaryIO) -> dict[str, Any] | None:
    """One message, or None at end of input."""
    header = _read_exact(stream, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    body = _read_exact(stream, size)
    if body is None:
        return None
    message = pickle.loads(body)  # noqa: S301 - from our own parent, over a private pipe
    assert isinstance(message, dict)
    return message


def resolve(reference: str) -> Any:
    """``"package.module:attribute"`` -> the attribute."""
    module_name, _, attribute = reference.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def install_path(parent_path: list[str]) -> None:
    """Make ``sys.path`` the parent's, in the parent's order, then this process's own entries
    that the parent lacks: a module reference resolves here to the file it resolved to there
    (an entry of the worker's own, such as its working folder, must not move ahead of the
    parent's and let another folder's ``kernels.py`` shadow the parent's)."""
    sys.path[:] = list(dict.fromkeys([*parent_path, *sys.path]))
    importlib.invalidate_caches()


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(3)


def main() -> int:
    # Take the protocol streams, then make fd 0 empty and fd 1 an alias of stderr.
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()

    def progress(what: str, timeout_s: float | None = None) -> None:
        write_message(proto_out, {"kind": "progress", "what": what, "timeout": timeout_s})

    runner: Any = None
    while True:
        message = read_message(proto_in)
        if message is None or message["kind"] == "exit":
            return 0
        kind = message["kind"]
        if kind == "configure":
            try:
                install_path(message.get("sys_path", []))
                factory: Callable[[Any], Any] = resolve(message["runner"])
                config = pickle.loads(message["config"])  # noqa: S301 - from our own parent
                runner = factory(config)
                reply: dict[str, Any] = {"kind": "ready", "pid": os.getpid()}
            except BaseException as error:  # noqa: BLE001 - reported to the parent
                reply = {
                    "kind": "error",
                    "message": traceback.format_exc(limit=20),
                    "summary": " ".join(f"{type(error).__name__}: {error}".split()),
                }
            write_message(proto_out, reply)
        elif kind == "measure":
            if runner is None:
                write_message(proto_out, {"kind": "error", "message": "worker not configured"})
                continue
            try:
                result = runner.measure(message["request"], progress)
            except BaseException:  # noqa: BLE001 - a runner bug is a failed row, not a crash
                result = {
                    "status": "runtime_error",
                    "times": [],
                    "message": "worker error: " + traceback.format_exc(limit=20)[-4000:],
                }
            sys.stdout.flush()
            sys.stderr.flush()
            write_message(proto_out, {"kind": "result", "result": result})
        else:
            write_message(proto_out, {"kind": "error", "message": f"unknown message {kind!r}"})


if __name__ == "__main__":
    sys.exit(main())
