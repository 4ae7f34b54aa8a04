"""Kernel bootstrap run inside the sandbox with ``python -c``: set rlimits, then start the kernel.

Stdlib only, and self-contained (its source is passed on the command line, so it runs in any kernel
environment). Usage::

    python -c <this source> '<json config>' -m ipykernel_launcher -f conn.json    # in-process
    python -c <this source> '<json config>' --exec /path/prog args...            # exec a program

The config is ``{"rlimits": {"RLIMIT_DATA": [soft, hard], ...}, "cpu_seconds": n | null,
"cpu_grace_seconds": n, "proxy": {"port": p, "socket": path} | null, "user": {"uid": n, "home":
path, "cwd": path} | null}``. With ``user`` (the application runs as root), the bootstrap first
switches to that uid and gid for good, which clears every capability, checks that none is left,
and only then enters the working directory (the kernel's uid owns it; root without capabilities
may not enter it). With ``-m`` the module runs
in this interpreter (``runpy``) so the ``SIGXCPU`` handler installed here stays in force: when the
CPU budget is used up, the running cell gets a ``CpuTimeLimitExceeded`` (a ``TimeoutError``) instead
of the kernel dying silently. With ``proxy``, a forked child forwards ``127.0.0.1:port`` (the
sandbox's own loopback) to the host's filtering proxy on the unix socket ``path``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import runpy
import signal
import socket
import sys
import threading
from types import FrameType


class CpuTimeLimitExceeded(TimeoutError):
    """The kernel used up the sandbox's CPU time budget (``RLIMIT_CPU``)."""


def _apply_rlimits(rlimits: dict[str, list[int]]) -> None:
    for name, (soft, hard) in rlimits.items():
        which = getattr(resource, name)
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY:
            hard = min(hard, current_hard)
            soft = min(soft, hard)
        resource.setrlimit(which, (soft, hard))


_CAPABILITY_SETS = ("CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:")
_PR_CAPBSET_DROP = 24
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _clear_bounding_and_inheritable() -> None:
    """Empty the bounding and inheritable sets (while CAP_SETPCAP is still held)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {capability}")
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.capget(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    data[2] = data[5] = 0  # inheritable, both 32-bit halves
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _become(uid: int, home: str, cwd: str) -> None:
    """Switch to ``uid`` (and the same gid, no supplementary groups) for good; create ``home``,
    enter ``cwd``."""
    _clear_bounding_and_inheritable()
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # leaving uid 0 clears the effective and permitted sets
    with open("/proc/self/status", encoding="ascii") as status:
        capabilities = [line.split()[1] for line in status if line.startswith(_CAPABILITY_SETS)]
    if os.getresuid() != (uid, uid, uid) or any(int(value, 16) for value in capabilities):
        sys.stderr.write("ipybox sandbox bootstrap: could not drop root privileges\n")
        os._exit(125)
    os.makedirs(home, mode=0o700, exist_ok=True)
    os.chdir(cwd)


def _install_cpu_handler(seconds: int, grace: int) -> None:
    def on_sigxcpu(signum: int, frame: FrameType | None) -> None:
        # Only while a cell runs (ipykernel installs default_int_handler for SIGINT then); raising
        # in the kernel's idle event loop would take the kernel down.
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            raise CpuTimeLimitExceeded(
                f"CPU time limit exceeded: the kernel used its budget of {seconds} s of CPU time "
                f"(sandbox limit cpu_seconds); it is stopped after {grace} more seconds of CPU time"
            )

    signal.signal(signal.SIGXCPU, on_sigxcpu)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            chunk = source.recv(65536)
            if not chunk:
                break
            sink.sendall(chunk)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _forward(client: socket.socket, target: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(target)
    except OSError:
        client.close()
        upstream.close()
        return
    other = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    other.start()
    _pipe(client, upstream)
    other.join()
    client.close()
    upstream.close()


def _start_forwarder(port: int, target: str) -> None:
    """Listen on 127.0.0.1:port now (no race with the kernel), serve from a forked child."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if os.fork() != 0:
        listener.close()
        return
    try:
        while True:
            client, _ = listener.accept()
            threading.Thread(target=_forward, args=(client, target), daemon=True).start()
    finally:
        os._exit(0)


def main(argv: list[str]) -> None:
    """Apply the config in ``argv[0]``, then run ``argv[1:]`` (``-m module ...`` or ``--exec ...``)."""
    config = json.loads(argv[0])
    command = argv[1:]
    _apply_rlimits(config.get("rlimits", {}))
    if config.get("user"):
        _become(config["user"]["uid"], config["user"]["home"], config["user"]["cwd"])
    if config.get("proxy"):
        _start_forwarder(config["proxy"]["port"], config["proxy"]["socket"])
    if config.get("cpu_seconds"):
        _install_cpu_handler(config["cpu_seconds"], config.get("cpu_grace_seconds", 0))
    if len(command) >= 2 and command[0] == "-m":
        sys.argv = [command[1], *command[2:]]
        runpy.run_module(command[1], run_name="__main__", alter_sys=True)
    elif len(command) >= 2 and command[0] == "--exec":
        os.execv(command[1], command[1:])
    else:
        sys.stderr.write(f"ipybox sandbox bootstrap: cannot run {command!r}\n")
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
