"""Asking the person at a terminal whether a call may run, and showing code's text there safely.

One question format for every terminal approver (``ipybox demo``, ``ipybox run``, the examples), and
answers read by the event loop instead of a thread blocked in ``input()``, so that Ctrl-C ends the
program at once. When the answers come from a pipe or a file they are echoed, so that questions and
outcomes stay on separate lines.

Text from the code (its output, the names and values of a call's arguments) never reaches the
terminal raw: :func:`terminal_safe` shows every character a terminal would act on or hide (ESC and
the other C0/C1 controls, bidi overrides, zero-width and other format characters) as a Python escape
such as ``\\x1b`` or ``\\u202e``, so code cannot move the cursor, erase or recolour the question.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from ipybox_core.approval import ApprovalRequest
    from ipybox_core.executor import RegisteredServer

_VALUE_CHARS = 80
_NAME_CHARS = 40
_ARGUMENTS_CHARS = 240
_COMMAND_CHARS = 400
_BUFFERS: dict[int, bytes] = {}

_TO_CHECK_IN_TEXT = re.compile(r"[^\t\n\x20-\x7e]+")
"""Runs of characters that may need escaping in multi-line text (printable ASCII, tab, newline never)."""
_TO_CHECK_IN_LINE = re.compile(r"[^\x20-\x7e]+")
_JOINERS = frozenset("\u200c\u200d")
"""Zero-width (non-)joiners, kept in output: emoji sequences and some scripts need them; they move nothing."""


def terminal_safe(text: str, *, lines: bool = True) -> str:
    """``text`` with every character a terminal would act on or hide shown as its Python escape.

    Escaped: the C0 and C1 controls (ESC ``\\x1b``, CR ``\\r``, backspace, CSI ``\\x9b``, ...),
    format characters (bidi overrides such as ``\\u202e``, zero-width spaces, tags), line and
    paragraph separators, surrogates, private-use and unassigned code points. With ``lines`` (code
    output) newlines, tabs, spaces such as U+00A0 and the zero-width joiners stay as they are;
    without it (one line of a question) everything but printable characters and the space is escaped.
    """
    pattern = _TO_CHECK_IN_TEXT if lines else _TO_CHECK_IN_LINE
    return pattern.sub(lambda run: _escaped_run(run.group(), lines), text)


def _escaped_run(run: str, lines: bool) -> str:
    if run.isprintable():
        return run
    return "".join(
        char
        if char.isprintable() or (lines and (char in _JOINERS or unicodedata.category(char) == "Zs"))
        else repr(char)[1:-1]
        for char in run
    )


class ApprovalCall(Protocol):
    """What a question needs: an :class:`~ipybox_core.ApprovalRequest`, or a framework's pending call."""

    @property
    def name(self) -> str: ...

    @property
    def args(self) -> Mapping[str, Any]: ...

    @property
    def hints(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class RegisteredCall:
    """A call as the host knows it: the registered server's and tool's names, the tool's hints."""

    name: str
    args: Mapping[str, Any]
    hints: Sequence[str]


def registered_call(
    request: ApprovalRequest, servers: Mapping[str, RegisteredServer]
) -> RegisteredCall | None:
    """``request`` named from the host's own data, or ``None`` when it names no registered tool.

    The name is the registered server's name and the tool's name as its server listed it; the hints
    are the request's annotations, which the tool server took from the registry, never from the
    kernel. A shell command is ``shell``.
    """
    if request.kind == "shell":
        return RegisteredCall("shell", request.args, ())
    server = servers.get(request.server)
    if server is None:
        return None
    for tool in server.package.tools:
        if tool.tool == request.tool:
            return RegisteredCall(f"{server.name}.{tool.tool}", request.args, tuple(request.hints))
    return None


def approval_question(call: ApprovalCall) -> str:
    """``approve shop.place_order(product_id='b-101', quantity=1) [destructive]?``

    Arguments are shown as Python keyword arguments; a multi-line string shows as its line count and
    a long value is shortened. A shell command shows as ``approve shell command 'ls -l'?``. The
    question is one line of bounded length, with every field passed through :func:`terminal_safe`;
    an argument name that is not a Python identifier is shown quoted (``'a b'=1``).
    """
    if call.name == "shell":
        target = f"shell command {_shortened(repr(call.args.get('command', '')), _COMMAND_CHARS)}"
    else:
        target = f"{call.name}({_arguments(call.args)})"
    hints = f" [{', '.join(call.hints)}]" if call.hints else ""
    return terminal_safe(f"approve {target}{hints}?", lines=False)


async def ask_approval(call: ApprovalCall, *, auto: bool = False) -> bool | None:
    """Ask :func:`approval_question` on stdout and read y/N from stdin (see :func:`ask`).

    Pass ``registered_call(request, executor.servers)`` to name the call from the host's registry
    (what ``ipybox demo`` and ``ipybox run`` do); print the code's output with :func:`terminal_safe`.
    """
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


def _arguments(args: Mapping[str, Any]) -> str:
    shown: list[str] = []
    length = 0
    for number, (key, value) in enumerate(args.items()):
        item = f"{_argument_name(key)}={_value(value)}"
        if shown and length + len(item) > _ARGUMENTS_CHARS:
            shown.append(f"... ({len(args) - number} more)")
            break
        shown.append(item)
        length += len(item) + 2
    return ", ".join(shown)


def _argument_name(key: object) -> str:
    """``key`` itself when it is an identifier, else quoted: the code chose it, it may be anything."""
    if isinstance(key, str) and key.isidentifier() and len(key) <= _NAME_CHARS:
        return key
    return _shortened(repr(key), _NAME_CHARS)


def _value(value: Any) -> str:
    if isinstance(value, str) and value.count("\n") > 1:
        return f"<{value.count(chr(10)) + (not value.endswith(chr(10)))} lines>"
    return _shortened(repr(value), _VALUE_CHARS)


def _shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _write(stream: TextIO, text: str) -> None:
    stream.write(text)
    stream.flush()
