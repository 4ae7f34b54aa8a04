"""Folding an execution's event stream into one result."""

from __future__ import annotations

from dataclasses import dataclass

from ipybox_core.errors import CodeError
from ipybox_core.kernel._text import HeadTailText, strip_ansi
from ipybox_core.kernel.events import (
    ClearOutput,
    DisplayData,
    ExecutionError,
    ExecutionFinished,
    ExecutionStatus,
    KernelEvent,
    OutputTruncated,
    StreamText,
)

DEFAULT_OUTPUT_LIMIT = 100_000


@dataclass(frozen=True)
class ExecutionOutput:
    """Everything one execution produced, ready to show to a model or a user."""

    text: str
    """stdout, stderr and text results in order; ANSI codes removed; if longer than the output limit,
    its head and tail around a ``[... N characters omitted ...]`` line."""
    images: tuple[bytes, ...] = ()
    """PNG images (matplotlib figures, ``display(Image(...))``), decoded."""
    displays: tuple[DisplayData, ...] = ()
    """Every rich output (displays and the result value) with its full MIME bundle."""
    result: DisplayData | None = None
    """The value of the cell's last expression, if it had one."""
    error: CodeError | None = None
    """The exception the code raised, with a clean traceback."""
    status: ExecutionStatus = "ok"
    execution_count: int | None = None
    omitted_chars: int = 0
    """How many characters of text were cut to respect the limit."""


class OutputCollector:
    """Accumulates :class:`KernelEvent` objects into an :class:`ExecutionOutput` in bounded memory.

    ``limit`` caps :attr:`ExecutionOutput.text` (characters). Use it when consuming
    :meth:`Kernel.execute` yourself; after an :class:`~ipybox_core.errors.ExecutionTimeout` or
    :class:`~ipybox_core.errors.KernelDied`, :meth:`output` still returns what arrived before.
    """

    def __init__(self, limit: int = DEFAULT_OUTPUT_LIMIT) -> None:
        self._text = HeadTailText(limit)
        self._displays: list[DisplayData] = []
        self._result: DisplayData | None = None
        self._error: CodeError | None = None
        self._finished: ExecutionFinished | None = None
        self._pending_cr = False

    def add(self, event: KernelEvent) -> None:
        """Fold one event in."""
        match event:
            case StreamText(text=text):
                self._append(text)
            case OutputTruncated(omitted_chars=count):
                self._text.skip(count)
            case DisplayData() as display:
                self._add_display(display)
            case ExecutionError(ename=ename, evalue=evalue, traceback=traceback):
                self._error = CodeError(ename, evalue, traceback)
            case ClearOutput():
                self._text.clear()
                self._displays.clear()
                self._result = None
            case ExecutionFinished() as finished:
                self._finished = finished

    def output(self) -> ExecutionOutput:
        """The result so far."""
        images = tuple(png for d in self._displays if (png := d.png) is not None)
        finished = self._finished
        status: ExecutionStatus = finished.status if finished else ("error" if self._error else "ok")
        return ExecutionOutput(
            text=self._text.render() + ("\r" if self._pending_cr else ""),
            images=images,
            displays=tuple(self._displays),
            result=self._result,
            error=self._error,
            status=status,
            execution_count=finished.execution_count if finished else None,
            omitted_chars=self._text.omitted,
        )

    def _append(self, text: str) -> None:
        # Normalise the pty's CRLF of `!cmd` output, even when "\r" and "\n" arrive in two chunks.
        if self._pending_cr:
            text = "\r" + text
            self._pending_cr = False
        if text.endswith("\r"):
            text = text[:-1]
            self._pending_cr = True
        self._text.append(strip_ansi(text.replace("\r\n", "\n")))

    def _add_display(self, display: DisplayData) -> None:
        if display.is_update and any(d.display_id == display.display_id for d in self._displays):
            self._displays = [display if d.display_id == display.display_id else d for d in self._displays]
            return
        self._displays.append(display)
        if display.is_result:
            self._result = display
        text = display.text
        if text is None or display.has_image:
            return
        if not self._text.ends_with_newline:
            self._append("\n")
        self._append(text if text.endswith("\n") else text + "\n")
