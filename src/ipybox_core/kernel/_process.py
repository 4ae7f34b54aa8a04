"""The kernel's OS process: launch in its own session, liveness without reaping, killing the tree."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

_LOG_TAIL_BYTES = 16384


@dataclass(frozen=True)
class _ProcStat:
    """A process as seen at one moment; ``start_time`` tells it from a later process with its pid."""

    pid: int
    ppid: int
    pgid: int | None
    sid: int | None
    start_time: float


class OutputTail:
    """The last bytes a process wrote to its stdout and stderr, read from a pipe the host holds.

    A thread drains the pipe until every writer has closed it, keeping only the last ``limit``
    bytes: the kernel can neither redirect its log to a file of the host's choosing nor make the
    host read more than that.
    """

    def __init__(self, read_fd: int, limit: int = _LOG_TAIL_BYTES) -> None:
        self._fd = read_fd
        self._limit = limit
        self._data = bytearray()
        self._total = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="ipybox-kernel-log", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._fd, 65536):
                with self._lock:
                    self._total += len(chunk)
                    self._data += chunk
                    if len(self._data) > self._limit:
                        del self._data[: len(self._data) - self._limit]
        except OSError:
            pass
        finally:
            os.close(self._fd)

    def text(self, wait: float = 0.0) -> tuple[str, bool]:
        """The kept bytes as text, and whether earlier output was dropped.

        ``wait`` gives a just-ended process's last writes that long to arrive.
        """
        if wait:
            self._thread.join(wait)
        with self._lock:
            return bytes(self._data).decode("utf-8", "replace"), self._total > len(self._data)


class KernelProcess:
    """A launched kernel (or the sandbox wrapper around it), started in a new session.

    The process is never reaped before :meth:`kill` ran, so its pid, process group and session ids
    cannot be reused by unrelated processes while ipybox still signals them. Its stdout and stderr
    go to a pipe (:attr:`output`); ``pass_fds`` are inherited by the process and closed here.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        pass_fds: Sequence[int] = (),
    ) -> None:
        read_fd, write_fd = os.pipe()
        try:
            self._popen = subprocess.Popen(
                list(argv),
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(pass_fds),
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
            for fd in pass_fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.output = OutputTail(read_fd)
        self.pid = self._popen.pid
        self._exit_code: int | None = None
        self._killed = False

    def exit_code(self) -> int | None:
        """The exit code once the process ended (negative: killed by that signal), else None."""
        if self._exit_code is not None:
            return self._exit_code
        if self._killed:
            return self._popen.returncode
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return self._popen.poll()
        except AttributeError:  # pragma: no cover - platforms without waitid
            return self._popen.poll()
        if info is None:
            return None
        if info.si_code == os.CLD_EXITED:
            self._exit_code = info.si_status
        else:
            self._exit_code = -info.si_status
        return self._exit_code

    @property
    def alive(self) -> bool:
        return self.exit_code() is None

    def interrupt_group(self) -> None:
        """Send SIGINT to the kernel's process group (what Ctrl-C in a terminal does)."""
        if self.exit_code() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGINT)

    def descendants(self) -> list[_ProcStat]:
        """The processes started by the kernel, directly or not."""
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return []
        return [stat for stat in map(_stat_of, children) if stat is not None]

    def _victims(self, known_descendants: Sequence[_ProcStat]) -> list[_ProcStat]:
        victims = {stat.pid: stat for stat in (*known_descendants, *self.descendants())}
        for stat in _process_table():
            if stat.pgid == self.pid or stat.sid == self.pid:
                victims.setdefault(stat.pid, stat)
        return list(victims.values())

    def kill(self, known_descendants: Sequence[_ProcStat] = ()) -> int | None:
        """SIGKILL the kernel, its process group, its session and its descendants; then reap it.

        ``known_descendants`` (from :meth:`descendants`, taken while the kernel still ran) catches
        children that left the session and were re-parented when the kernel exited.
        Returns the exit code. Synchronous and safe to call more than once.
        """
        if self._killed:
            return self._popen.returncode
        victims = self._victims(known_descendants)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        for stat in victims:
            if stat.pid != self.pid and _same_process(stat):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(stat.pid, signal.SIGKILL)
        if self.exit_code() is None:
            with contextlib.suppress(ProcessLookupError):
                self._popen.kill()
        self._killed = True
        with contextlib.suppress(subprocess.TimeoutExpired):  # stuck in uninterruptible sleep
            self._popen.wait(timeout=10)
        if self._exit_code is None:
            self._exit_code = self._popen.returncode
        return self._exit_code


def _process_table() -> list[_ProcStat]:
    """Every process this user may see (others' process group or session may be unknown)."""
    return [stat for stat in map(_stat_of, psutil.process_iter()) if stat is not None]


def _stat_of(process: psutil.Process) -> _ProcStat | None:
    try:
        with process.oneshot():
            ppid, start_time = process.ppid(), process.create_time()
    except psutil.Error:
        return None
    return _ProcStat(
        pid=process.pid,
        ppid=ppid,
        pgid=_id_of(os.getpgid, process.pid),
        sid=_id_of(os.getsid, process.pid),
        start_time=start_time,
    )


def _id_of(get: Callable[[int], int], pid: int) -> int | None:
    try:
        return get(pid)
    except OSError:  # gone, or another user's process on macOS
        return None


def _same_process(stat: _ProcStat) -> bool:
    """Whether ``stat.pid`` still names the process seen earlier (pids get reused)."""
    try:
        return psutil.Process(stat.pid).create_time() == stat.start_time
    except psutil.Error:
        return False


def pid_exists(pid: int) -> bool:
    """Whether a process with ``pid`` exists (also when it belongs to another user)."""
    return psutil.pid_exists(pid)
