"""Kernel-side start-up code, run inside the IPython kernel before it reports ready.

``Kernel`` embeds this module's source in a start-up file passed to ``IPKernelApp.exec_files`` (no
extra round trip at start-up); that file runs it in a namespace of its own and calls
:func:`bootstrap`, so nothing leaks into the user's namespace. Standard library and IPython only:
it must work in any kernel environment.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import importlib
import os
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

TRUNCATION_MIME = "application/vnd.ipybox.output-truncated+json"
"""A display message with ``{"omitted_chars": N}``: N characters of stream output were dropped."""


def bootstrap(*, workspace: str | None, shell_approval: bool, output_limit: int) -> None:
    """Prepare the kernel: crash dumps to the log, import caches, cwd reset, shell hook, output cap."""
    from IPython import get_ipython

    shell = get_ipython()

    # A crash in native code dumps the Python stacks to the kernel log (ipykernel captures fd 2 for
    # the notebook; it keeps the original stderr, which is the log, as this copy).
    log_fd = getattr(sys.stderr, "_original_stdstream_copy", None)
    if isinstance(log_fd, int):
        faulthandler.enable(file=log_fd, all_threads=False)

    def invalidate_import_caches(*_: object) -> None:
        # Packages generated after start-up (``mcptools``) must be importable right away.
        importlib.invalidate_caches()

    shell.events.register("pre_run_cell", invalidate_import_caches)

    if workspace is not None:

        def reset_cwd(*_: object) -> None:
            with contextlib.suppress(OSError):
                os.chdir(workspace)

        shell.events.register("post_run_cell", reset_cwd)

    if shell_approval:
        _install_shell_approval(shell)

    _install_output_cap(shell, output_limit)


def _install_output_cap(shell: Any, limit: int) -> None:
    """Send at most ``limit`` characters of stdout/stderr per execution, then only the last
    ``limit // 2`` at its end, after a display message that says how many were dropped.

    Huge output then never leaves the kernel (the host reads iopub slower than a loop can print).
    Covers ``print``, ``sys.stdout.write`` and fd-level output (subprocesses, C code), which
    ipykernel forwards through the same stream objects.
    """
    from IPython.display import publish_display_data

    tail_limit = limit // 2
    lock = threading.Lock()
    held: deque[tuple[Callable[[str], Any], str]] = deque()
    counts = {"live": limit, "held": 0, "omitted": 0}

    def hold(write: Callable[[str], Any], text: str) -> None:
        if len(text) > tail_limit:
            counts["omitted"] += counts["held"] + len(text) - tail_limit
            held.clear()
            counts["held"] = 0
            text = text[len(text) - tail_limit :] if tail_limit else ""
        if text:
            held.append((write, text))
            counts["held"] += len(text)
        overflow = counts["held"] - tail_limit
        while overflow > 0:
            first_write, first = held[0]
            cut = min(overflow, len(first))
            if cut == len(first):
                held.popleft()
            else:
                held[0] = (first_write, first[cut:])
            counts["held"] -= cut
            counts["omitted"] += cut
            overflow -= cut

    def capped(stream: Any) -> None:
        original = stream.write

        def write(text: str) -> int:
            if not isinstance(text, str):
                return original(text)
            with lock:
                live = counts["live"]
                passed, rest = text[:live], text[live:]
                counts["live"] = max(0, live - len(text))
                if rest:
                    hold(original, rest)
            if passed:
                original(passed)
            return len(text)

        stream.write = write

    def reset(*_: object) -> None:
        with lock:
            held.clear()
            counts.update(live=limit, held=0, omitted=0)

    def release(*_: object) -> None:
        _wait_for_captured_fd_output()
        with lock:
            tail = list(held)
            omitted = counts["omitted"]
        reset()
        if omitted:
            publish_display_data(  # type: ignore[no-untyped-call]
                {TRUNCATION_MIME: {"omitted_chars": omitted}}
            )
        for write, text in tail:
            write(text)

    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "write"):
            capped(stream)
    shell.events.register("pre_execute", reset)
    shell.events.register("post_execute", release)


def _wait_for_captured_fd_output(timeout: float = 1.0) -> None:
    """Let ipykernel forward what subprocesses wrote to fd 1/2 before the execution ends.

    ipykernel reads those pipes in background threads; without this, the last output of a
    ``subprocess.run`` can arrive after the execution finished (and be lost).
    """
    import fcntl
    import struct
    import termios
    import time

    end = time.monotonic() + timeout
    waited = False
    for stream in (sys.stdout, sys.stderr):
        fid = getattr(stream, "_fid", None)
        if not isinstance(fid, int):
            continue
        while time.monotonic() < end:
            try:
                unread = struct.unpack("i", fcntl.ioctl(fid, termios.FIONREAD, b"\0\0\0\0"))[0]
            except OSError:
                break
            if not unread:
                break
            waited = True
            time.sleep(0.001)
    if waited:
        time.sleep(0.005)  # the reader thread hands its last chunk to the stream


def _install_shell_approval(shell: Any) -> None:
    """Ask ``ipybox_core.runtime.approve_shell_command`` before any IPython shell escape runs.

    Covers ``!cmd``, ``!!cmd``, ``%sx``, ``%system``, aliases, ``get_ipython().system/getoutput``
    (after ``$var``/``{expr}`` expansion) and the ``%%script`` family (``%%bash``, ``%%sh``, ...).
    """

    import ipykernel.zmqshell as zmq_shell
    import IPython.core.interactiveshell as core_shell

    def approve(command: str) -> None:
        __tracebackhide__ = True
        try:
            from ipybox_core import runtime
        except ImportError as exc:
            raise PermissionError(
                f"shell command not run: it needs approval, but ipybox_core is not importable ({exc})"
            ) from None
        runtime.approve_shell_command(command)

    def approving(run: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(run)
        def approved(command: str, *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            approve(command)
            return run(command, *args, **kwargs)

        return approved

    for module, name in (
        (zmq_shell, "system"),
        (core_shell, "system"),
        (core_shell, "getoutput"),
        (core_shell, "get_output_error_code"),
    ):
        original = getattr(module, name, None)
        if original is not None:
            setattr(module, name, approving(original))

    try:  # IPython >= 9.? loads magics lazily; indexing the registry loads them
        script_magics = shell.magics_manager.registry["ScriptMagics"]
    except KeyError:
        script_magics = None
    if script_magics is not None:
        shebang = script_magics.shebang

        @functools.wraps(shebang)
        def approved_shebang(line: str, cell: str) -> Any:
            __tracebackhide__ = True
            approve(f"%%script {line}\n{cell.rstrip(chr(10))}")
            return shebang(line, cell)

        script_magics.shebang = approved_shebang  # the %%bash, %%sh, ... magics call this
        shell.magics_manager.magics["cell"]["script"] = approved_shebang
