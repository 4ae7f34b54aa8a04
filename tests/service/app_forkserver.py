"""A fork server for the service tests' application processes (see :class:`service_kit.AppServer`).

``python app_forkserver.py FD``: FD is a ``SOCK_SEQPACKET`` Unix socket to the test process. Each
message on it is a JSON command ``{"id", "app", "args", "env", "cwd"}`` with three file
descriptors, the new process's stdin, stdout and stderr. The server imports the app of this folder
once (its framework with it), forks, and answers ``{"id", "pid"}``; the child is the app's process:
its own pid, those three pipes, ``env`` and ``cwd``, ``sys.argv`` as ``python APP ARGS`` would have
it, and it runs the app's ``run(args)`` (what its ``__main__`` runs) and exits as that process
would (an uncaught exception is printed and exits 1; a signal kills it). When a child ends the
server answers ``{"pid", "returncode"}`` (``-N`` for signal N, as ``Popen.returncode``). An app
without ``run()`` or that fails to import is answered ``{"id", "error"}`` (run it as a process of
its own). The socket's end ends the server.

The server forks before any event loop or thread exists, so each child starts as clean as a new
interpreter would after its imports, without paying for them: a framework import is 1-3 s of CPU.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

APPS = Path(__file__).parent
sys.path.insert(0, str(APPS.parent))
sys.path.insert(0, str(APPS))


def send(channel: socket.socket, message: dict[str, Any]) -> None:
    channel.send(json.dumps(message).encode())


def reap(channel: socket.socket) -> None:
    """Answer the exit status of every child that ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        send(channel, {"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})


def serve(channel: socket.socket) -> tuple[ModuleType, dict[str, Any]] | None:
    """Fork a child per command; returns in each child (its app and command), or at the socket's end."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    while True:
        ready, _, _ = select.select([channel, wake_read], [], [])
        if wake_read in ready:
            while True:
                try:
                    os.read(wake_read, 4096)
                except BlockingIOError:
                    break
            reap(channel)
        if channel not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 3)
        if not message:
            return None
        command = json.loads(message)
        try:
            app = importlib.import_module(str(command["app"]).removesuffix(".py"))
            if not callable(getattr(app, "run", None)):
                raise LookupError(f"{command['app']} has no run(argv)")
        except BaseException:
            send(channel, {"id": command["id"], "error": traceback.format_exc()})
            for fd in fds:
                os.close(fd)
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()  # the imports' objects: a child's collections skip them and leave their pages shared
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (wake_read, wake_write):
                os.close(fd)
            channel.close()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            return app, command
        for fd in fds:
            os.close(fd)
        send(channel, {"id": command["id"], "pid": pid})


def main() -> None:
    channel = socket.socket(fileno=int(sys.argv[1]))
    forked = serve(channel)
    if forked is None:
        return
    app, command = forked
    os.environ.clear()
    os.environ.update(command["env"])
    os.chdir(command["cwd"])
    sys.argv = [str(APPS / command["app"]), *command["args"]]
    asyncio.run(app.run(list(command["args"])))


if __name__ == "__main__":
    main()
