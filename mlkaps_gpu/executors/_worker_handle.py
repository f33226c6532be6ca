"""Parent side of a measurement worker: start, talk to, time out and restart it.

One :class:`WorkerHandle` owns at most one live worker process
(``python -m mlkaps_gpu.executors._worker``, started as an argument list, pipes for the
protocol, its stderr in an unlinked temporary file whose tail goes into failure messages).
:meth:`WorkerHandle.measure` never raises for what a kernel does: it returns either the runner's
result or a failure result (``runtime_error`` naming the signal, or ``timeout``); the dead or
killed worker is replaced on the next call. The worker leads its own process group (a new
session), and the whole group is killed with it: processes a kernel forked do not outlive it.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._base import RUNTIME_ERROR, TIMEOUT, ExecutorError
from ._worker import _HEADER

#: Seconds a new worker may take to start and configure itself (imports numpy, pandas ...).
START_TIMEOUT_S = 120.0
#: Characters of the worker's stderr kept in a failure message.
STDERR_TAIL = 2000

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
#: Longest single wait on the worker's pipe (a longer timeout waits in several).
_POLL_S = 3600.0


class _WorkerGoneError(Exception):
    pass


class _WorkerTimeoutError(Exception):
    pass


def describe_exit(returncode: int | None) -> str:
    """'killed by SIGSEGV (Segmentation fault)' / 'exited with status 3'."""
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        text = signal.strsignal(number) or ""
        return f"killed by {name} ({text})" if text else f"killed by {name}"
    return f"exited with status {returncode}"


class WorkerHandle:
    """A restartable worker process running one runner.

    Args:
        runner: ``"module:factory"`` the worker calls with the unpickled ``config``.
        config: the runner's configuration (must be picklable; unpickled in the worker after
            the parent's ``sys.path`` is installed, so functions of test modules resolve).
        env: environment variables added to the worker's (e.g. ``OMP_PROC_BIND``).
    """

    def __init__(self, runner: str, config: Any, *, env: Mapping[str, str] | None = None) -> None:
        self.runner = runner
        try:
            self._config = pickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as error:
            raise ExecutorError(
                f"the executor's configuration cannot be sent to the worker process ({error}); "
                "builders and checks must be module-level functions"
            ) from error
        self.env = dict(env or {})
        #: How many worker processes were started (1 + restarts).
        self.starts = 0
        #: Process id of the live worker, None when there is none.
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr_fd: int | None = None
        self._buffer = b""

    # ------------------------------------------------------------------------------ life cycle
    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        paths = [_PACKAGE_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env.update(self.env)
        return env

    def start(self) -> None:
        """Start (and configure) a worker if none is alive."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self._discard()
        handle, path = tempfile.mkstemp(prefix="mlkaps_worker_", suffix=".err")
        os.close(handle)
        self._stderr_fd = os.open(path, os.O_RDWR | os.O_APPEND)
        os.unlink(path)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "mlkaps_gpu.executors._worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr_fd,
            env=self._environment(),
            close_fds=True,
            start_new_session=True,  # its own process group, killed as a whole
        )
        self.starts += 1
        self.pid = self._proc.pid
        self._buffer = b""
        message = {
            "kind": "configure",
            # "" is the working folder: the worker's, named, at the same place
            "sys_path": [p or os.getcwd() for p in sys.path],
            "runner": self.runner,
            "config": self._config,
        }
        try:
            self._send(message)
            reply = self._receive(START_TIMEOUT_S)
        except (_WorkerGoneError, _WorkerTimeoutError) as error:
            detail = self._failure_text(str(error))
            self._discard()
            raise ExecutorError(f"the worker process could not start: {detail}") from None
        if reply["kind"] != "ready":
            self._discard()
            detail = reply.get("summary") or reply["message"]
            raise ExecutorError(f"the worker process could not be configured: {detail}")

    def close(self) -> None:
        """Stop the worker (politely, then by force). Safe to call twice."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                self._send({"kind": "exit"})
                proc.wait(timeout=2.0)
            except (OSError, _WorkerGoneError, subprocess.TimeoutExpired):
                pass
        self._discard()

    def restart(self) -> None:
        self._discard()

    def __del__(self) -> None:
        try:
            self._discard()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass

    def _discard(self) -> None:
        proc = self._proc
        self._proc = None
        self.pid = None
        if proc is not None:
            _kill_group(proc)
            try:
                proc.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                pass
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        if self._stderr_fd is not None:
            os.close(self._stderr_fd)
            self._stderr_fd = None

    # -------------------------------------------------------------------------------- measure
    def measure(self, request: dict[str, Any], step_timeout_s: float) -> dict[str, Any]:
        """Run one request; the result dict has at least ``status``, ``times``, ``message``.

        ``step_timeout_s`` bounds every step the worker announces (set-up, each kernel run,
        each check): silence for longer kills the worker and gives ``timeout`` (``inf``: no
        bound).
        """
        self.start()
        assert self._stderr_fd is not None
        os.ftruncate(self._stderr_fd, 0)
        what = "sending the request"
        timeout = step_timeout_s
        try:
            self._send({"kind": "measure", "request": request})
            while True:
                reply = self._receive(timeout)
                if reply["kind"] == "progress":
                    what = str(reply["what"])
                    timeout = float(reply.get("timeout") or step_timeout_s)
                    continue
                if reply["kind"] == "result":
                    result = dict(reply["result"])
                    if result.pop("restart", False):
                        self._discard()
                    return result
                raise ExecutorError(f"worker protocol error: {reply.get('message', reply)}")
        except _WorkerTimeoutError:
            self._kill()
            return {
                "status": TIMEOUT,
                "times": [],
                "message": f"no progress for {timeout:g} s while {what}; worker killed",
            }
        except _WorkerGoneError as error:
            detail = self._failure_text(str(error))
            self._discard()
            return {"status": RUNTIME_ERROR, "times": [], "message": f"while {what}: {detail}"}

    def _kill(self) -> None:
        if self._proc is not None:
            _kill_group(self._proc)
        self._discard()

    def _failure_text(self, reason: str) -> str:
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            _kill_group(proc)  # the worker is gone: what its kernel forked goes too
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                code = proc.wait()
        text = f"worker {describe_exit(code)}" if code is not None else reason
        tail = self.stderr_tail()
        return f"{text}; stderr: {tail}" if tail else text

    def stderr_tail(self, limit: int = STDERR_TAIL) -> str:
        if self._stderr_fd is None:
            return ""
        size = os.fstat(self._stderr_fd).st_size
        data = os.pread(self._stderr_fd, limit, max(0, size - limit))
        return data.decode("utf-8", "replace").strip()

    # ------------------------------------------------------------------------------- transport
    def _send(self, message: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise _WorkerGoneError("no worker")
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            proc.stdin.write(_HEADER.pack(len(data)) + data)
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise _WorkerGoneError(f"pipe closed ({error})") from None

    def _receive(self, timeout_s: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdout is None:
            raise _WorkerGoneError("no worker")
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while True:
            if len(self._buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self._buffer)
                end = _HEADER.size + size
                if len(self._buffer) >= end:
                    body = self._buffer[_HEADER.size : end]
                    self._buffer = self._buffer[end:]
                    message = pickle.loads(body)  # noqa: S301 - our own worker's pipe
                    assert isinstance(message, dict)
                    return message
            left = deadline - time.monotonic()
            if left <= 0:
                raise _WorkerTimeoutError()
            ready, _, _ = select.select([fd], [], [], min(left, _POLL_S))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise _WorkerGoneError("the worker closed its output")
            self._buffer += chunk


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker's process group (the worker and whatever its kernel forked). Called
    before the worker is reaped, so its group id cannot have been reused."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        if proc.poll() is None:
            proc.kill()
