"""Asking the person at a terminal whether a call may run.

One question format for every terminal approver (``ipybox demo``, ``ipybox run``, the examples), and
answers read by the event loop instead of a thread blocked in ``input()``, so that Ctrl-C ends the
program at once. When the answers come from a pipe or a file they are echoed, so that questions and
outcomes stay on separate lines.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TextIO

_VALUE_CHARS = 80
_BUFFERS: dict[int, bytes] = {}


class ApprovalCall(Protocol):
    """What a question needs: an :class:`~ipybox_core.ApprovalRequest`, or a framework's pending call."""

    @property
    def name(self) -> str: ...

    @property
    def args(self) -> Mapping[str, Any]: ...

    @property
    def hints(self) -> Sequence[str]: ...


def approval_question(call: ApprovalCall) -> str:
    """``approve shop.place_order(product_id='b-101', quantity=1) [destructive]?``

    Arguments are shown as Python keyword arguments; a multi-line string shows as its line count and
    a long value is shortened. A shell command shows as ``approve shell command 'ls -l'?``.
    """
    if call.name == "shell":
        target = f"shell command {call.args.get('command', '')!r}"
    else:
        target = f"{call.name}({', '.join(f'{key}={_value(value)}' for key, value in call.args.items())})"
    hints = f" [{', '.join(call.hints)}]" if call.hints else ""
    return f"approve {target}{hints}?"


async def ask_approval(call: ApprovalCall, *, auto: bool = False) -> bool | None:
    """Ask :func:`approval_question` on stdout and read y/N from stdin (see :func:`ask`)."""
    return await ask(approval_question(call), auto=auto)


async def ask(
    question: str,
    *,
    auto: bool = False,
    source: TextIO | None = None,
    prompt: TextIO | None = None,
    auto_label: str = "y (auto)",
) -> bool | None:
    """Write ``question [y/N]`` to ``prompt`` (stdout) and read the answer from ``source`` (stdin).

    Returns ``True`` for y/yes, ``False`` for n/no or an empty answer, and ``None`` when there is no
    answer (end of input, e.g. Ctrl-D). With ``auto`` the question is shown as answered
    ``auto_label``. Cancelling the awaiting task (Ctrl-C under ``asyncio.run``) stops the read at once.
    """
    source = source if source is not None else sys.stdin
    prompt = prompt if prompt is not None else sys.stdout
    if auto:
        _write(prompt, f"{question} [y/N] {auto_label}\n")
        return True
    echo = not source.isatty()
    while True:
        _write(prompt, f"{question} [y/N] ")
        line = await read_line(source.fileno())
        if echo:
            _write(prompt, f"{line or ''}\n")
        if line is None:
            return None
        answer = line.strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("", "n", "no"):
            return False
        _write(prompt, "please answer y or n\n")


async def read_line(fd: int) -> str | None:
    """The next line of file descriptor ``fd`` without its newline; ``None`` at end of input."""
    buffered = _BUFFERS.pop(fd, b"")
    while b"\n" not in buffered:
        chunk = await _read_chunk(fd)
        if not chunk:
            return buffered.decode(errors="replace") if buffered else None
        buffered += chunk
    line, _, rest = buffered.partition(b"\n")
    if rest:
        _BUFFERS[fd] = rest
    return line.decode(errors="replace").rstrip("\r")


async def _read_chunk(fd: int) -> bytes:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    try:
        loop.add_reader(fd, wake)
    except (OSError, ValueError, NotImplementedError):  # a regular file (never blocks) or no selector
        return os.read(fd, 4096)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    return os.read(fd, 4096)


def _value(value: Any) -> str:
    if isinstance(value, str) and value.count("\n") > 1:
        return f"<{value.count(chr(10)) + (not value.endswith(chr(10)))} lines>"
    text = repr(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 3] + "..."


def _write(stream: TextIO, text: str) -> None:
    stream.write(text)
    stream.flush()
