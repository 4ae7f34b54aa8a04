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

DISPLAY_OMITTED_MIME = "application/vnd.ipybox.display-omitted+json"
"""A display message with ``{"displays": N, "trimmed": N, "size": N, "mime_types": [...]}``: rich
output the kernel dropped (whole displays, displays that lost parts, characters, which types)."""

DISPLAY_ALLOWANCE = 4_000_000
"""Characters of display data an execution may send beyond ``output_limit`` (plots must fit)."""


def display_budget(output_limit: int) -> int:
    """Characters of display data (MIME parts and metadata, images as base64) per execution."""
    return max(0, output_limit) + DISPLAY_ALLOWANCE


_END = object()


def data_size(value: Any, cap: int) -> int:
    """Roughly the length of ``value`` as JSON (bytes count as base64); stops counting above ``cap``.

    Iterative (no recursion on deep nesting) and at most linear in ``cap`` for containers.
    """
    size = 0
    stack: list[Any] = [iter((value,))]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
            continue
        if isinstance(item, str):
            size += len(item) + 2
        elif isinstance(item, (bytes, bytearray)):
            size += 4 * ((len(item) + 2) // 3) + 2
        elif isinstance(item, dict):
            size += 2
            stack.append(iter(item.items()))
        elif isinstance(item, (list, tuple)):
            size += 2 + len(item)
            stack.append(iter(item))
        else:
            size += 8
        if size > cap:
            return size
    return size


def truncate_text(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its head and tail around a line that
    says how many were omitted, all within ``limit`` (the host's format: it passes it unchanged)."""
    if len(text) <= limit:
        return text
    room = max(0, limit - 64)
    head, tail = room // 2, room - room // 2
    omitted = len(text) - head - tail
    return text[:head] + f"\n[... {omitted:,} characters omitted ...]\n" + text[len(text) - tail :]


def fit_display(
    data: dict[str, Any], metadata: Any, room: int
) -> tuple[dict[str, Any], Any, int, list[str], int]:
    """The part of a display that fits in ``room`` characters: all of it, or else its smallest MIME
    parts first, then the metadata if it still fits (``{}`` if not).

    Returns the kept data, the kept metadata, the size used, the dropped MIME types and their size
    (with the dropped metadata's). The host applies the same rule to what a kernel sends.
    """
    sizes = {mime: len(str(mime)) + data_size(value, room) for mime, value in data.items()}
    meta_size = data_size(metadata, room) if metadata else 0
    total = sum(sizes.values()) + meta_size
    if total <= room:
        return data, metadata, total, [], 0
    kept: dict[str, Any] = {}
    used = dropped_size = 0
    dropped: list[str] = []
    for mime in sorted(sizes, key=sizes.__getitem__):
        if used + sizes[mime] <= room:
            kept[mime] = data[mime]
            used += sizes[mime]
        else:
            dropped.append(str(mime))
            dropped_size += sizes[mime]
    kept_metadata: Any = metadata
    if meta_size:
        if kept and used + meta_size <= room:
            used += meta_size
        else:
            kept_metadata = {}
            dropped_size += meta_size
    return kept, kept_metadata, used, dropped, dropped_size


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
        # The directory itself, should it be renamed while the kernel runs (a warm session's).
        workspace_fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)

        def reset_cwd(*_: object) -> None:
            try:
                os.chdir(workspace)
            except OSError:
                with contextlib.suppress(OSError):
                    os.fchdir(workspace_fd)

        shell.events.register("post_run_cell", reset_cwd)

    if shell_approval:
        _install_shell_approval(shell)

    _install_output_cap(shell, output_limit)
    _install_display_cap(shell, output_limit)


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


def _install_display_cap(shell: Any, limit: int) -> None:
    """Send at most ``display_budget(limit)`` characters of display data per execution.

    Covers ``display(...)`` (and updates, and figures) and the cell's result value. Text parts
    longer than ``limit`` keep their head and tail. A display that does not fit loses its largest
    MIME parts (all of them if nothing fits); a small display
    message says what was dropped. Hostile code can bypass this: the host enforces the same budget.
    """
    budget = display_budget(limit)
    lock = threading.Lock()
    left = [budget]
    markers = (TRUNCATION_MIME, DISPLAY_OMITTED_MIME)
    publish = shell.display_pub.publish

    def admit(data: dict[str, Any], metadata: Any) -> tuple[dict[str, Any], Any, dict[str, Any] | None]:
        # Long text keeps its head and tail (the host would cut it the same way).
        data = {
            mime: truncate_text(value, limit)
            if isinstance(value, str) and isinstance(mime, str) and mime.startswith("text/")
            else value
            for mime, value in data.items()
        }
        with lock:
            kept, kept_metadata, used, dropped, dropped_size = fit_display(data, metadata, left[0])
            left[0] -= used
        if not dropped and not dropped_size:
            return kept, kept_metadata, None
        report = {
            "displays": 0 if kept else 1,
            "trimmed": 1 if kept else 0,
            "size": dropped_size,
            "mime_types": dropped,
        }
        return kept, kept_metadata, {DISPLAY_OMITTED_MIME: report}

    def capped_publish(data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
        if not isinstance(data, dict) or any(marker in data for marker in markers):
            return publish(data, metadata, *args, **kwargs)
        kept, kept_metadata, report = admit(data, metadata)
        result = publish(kept, kept_metadata, *args, **kwargs) if kept else None
        if report is not None:
            publish(report)
        return result

    shell.display_pub.publish = capped_publish

    hook = shell.displayhook
    write_format_data = getattr(hook, "write_format_data", None)
    if write_format_data is not None:

        def capped_write_format_data(format_dict: Any, md_dict: Any = None) -> Any:
            if not isinstance(format_dict, dict):
                return write_format_data(format_dict, md_dict)
            kept, kept_metadata, report = admit(format_dict, md_dict)
            if report is not None:
                publish(report)
            # An empty bundle is not sent (ipykernel's finish_displayhook checks the data).
            return write_format_data(kept, kept_metadata)

        hook.write_format_data = capped_write_format_data

    def reset(*_: object) -> None:
        with lock:
            left[0] = budget

    shell.events.register("pre_execute", reset)


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
            from ipybox_core.inkernel import runtime
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
