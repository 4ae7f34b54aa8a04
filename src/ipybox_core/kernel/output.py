"""Folding an execution's event stream into one result."""

from __future__ import annotations

from dataclasses import dataclass

from ipybox_core.errors import CodeError
from ipybox_core.inkernel._bootstrap import display_budget
from ipybox_core.kernel._stream_limit import DisplayBudget
from ipybox_core.kernel._text import HeadTailText, strip_ansi
from ipybox_core.kernel.events import (
    ClearOutput,
    DisplayData,
    DisplayOmitted,
    ExecutionError,
    ExecutionFinished,
    ExecutionStatus,
    KernelEvent,
    OutputTruncated,
    StreamText,
)

DEFAULT_OUTPUT_LIMIT = 100_000
_MAX_LISTED_TYPES = 8


def omitted_displays_marker(displays: int, trimmed: int, size: int, mime_types: list[str]) -> str:
    """The line that says which display data was dropped to respect the output limit."""
    parts = []
    if displays:
        parts.append(f"{displays:,} display{'s' if displays != 1 else ''}")
    if trimmed:
        parts.append(f"parts of {trimmed:,} display{'s' if trimmed != 1 else ''}")
    what = " and ".join(parts) or "display data"
    types = ", ".join(mime_types[:_MAX_LISTED_TYPES]) + (
        ", ..." if len(mime_types) > _MAX_LISTED_TYPES else ""
    )
    detail = f"{size:,} characters" + (f" of {types}" if types else "")
    return f"\n[... {what} omitted ({detail}): over the output limit ...]\n"


@dataclass(frozen=True)
class ExecutionOutput:
    """Everything one execution produced, ready to show to a model or a user."""

    text: str
    """stdout, stderr and text results in order; ANSI codes removed; if longer than the output limit,
    its head and tail around a ``[... N characters omitted ...]`` line; if displays were dropped to
    respect the limit, a last ``[... N displays omitted (...) ...]`` line says so."""
    images: tuple[bytes, ...] = ()
    """PNG images (matplotlib figures, ``display(Image(...))``), decoded."""
    displays: tuple[DisplayData, ...] = ()
    """Every rich output (displays and the result value) with its MIME bundle (within the limit)."""
    result: DisplayData | None = None
    """The value of the cell's last expression, if it had one."""
    error: CodeError | None = None
    """The exception the code raised, with a clean traceback."""
    status: ExecutionStatus = "ok"
    execution_count: int | None = None
    omitted_chars: int = 0
    """How many characters of text were cut to respect the limit."""
    omitted_displays: int = 0
    """How many displays were dropped, whole or in part, to respect the limit (the text ends with a
    line that says so)."""


class OutputCollector:
    """Accumulates :class:`KernelEvent` objects into an :class:`ExecutionOutput` in bounded memory.

    ``limit`` caps :attr:`ExecutionOutput.text` (characters); the displays kept share a budget of
    ``limit`` plus a constant (see :class:`DisplayOmitted`), whatever events are added. Use it when
    consuming :meth:`Kernel.execute` yourself; after an
    :class:`~ipybox_core.errors.ExecutionTimeout` or :class:`~ipybox_core.errors.KernelDied`,
    :meth:`output` still returns what arrived before.
    """

    def __init__(self, limit: int = DEFAULT_OUTPUT_LIMIT) -> None:
        self._text = HeadTailText(limit)
        self._display_budget = display_budget(limit)
        self._displays: list[DisplayData] = []
        self._sizes: list[int] = []
        self._kept_size = 0
        self._omitted_displays = 0
        self._trimmed_displays = 0
        self._omitted_size = 0
        self._omitted_types: dict[str, None] = {}
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
            case DisplayOmitted() as omitted:
                self._count_omission(omitted)
            case ExecutionError(ename=ename, evalue=evalue, traceback=traceback):
                self._error = CodeError(ename, evalue, traceback)
            case ClearOutput():
                self._text.clear()
                self._displays.clear()
                self._sizes.clear()
                self._kept_size = 0
                self._result = None
            case ExecutionFinished() as finished:
                self._finished = finished

    def output(self) -> ExecutionOutput:
        """The result so far."""
        images = tuple(png for d in self._displays if (png := d.png) is not None)
        finished = self._finished
        status: ExecutionStatus = finished.status if finished else ("error" if self._error else "ok")
        text = self._text.render() + ("\r" if self._pending_cr else "")
        if self._omitted_displays or self._trimmed_displays or self._omitted_size:
            marker = omitted_displays_marker(
                self._omitted_displays,
                self._trimmed_displays,
                self._omitted_size,
                list(self._omitted_types),
            )
            text = text + marker[1:] if not text or text.endswith("\n") else text + marker
        return ExecutionOutput(
            text=text,
            images=images,
            displays=tuple(self._displays),
            result=self._result,
            error=self._error,
            status=status,
            execution_count=finished.execution_count if finished else None,
            omitted_chars=self._text.omitted,
            omitted_displays=self._omitted_displays + self._trimmed_displays,
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

    def _count_omission(self, omitted: DisplayOmitted) -> None:
        self._omitted_displays += omitted.displays
        self._trimmed_displays += omitted.trimmed
        self._omitted_size += omitted.size
        for mime in omitted.mime_types:
            if len(self._omitted_types) < _MAX_LISTED_TYPES + 1:
                self._omitted_types.setdefault(mime, None)

    def _add_display(self, display: DisplayData) -> None:
        # The kept displays stay within the display budget whatever the events say; an update
        # gives back the size of the displays it replaces.
        replaced = (
            [i for i, d in enumerate(self._displays) if d.display_id == display.display_id]
            if display.is_update
            else []
        )
        room = self._display_budget - self._kept_size + sum(self._sizes[i] for i in replaced)
        budget = DisplayBudget(room)
        admitted = budget.admit(display)
        for event in admitted:
            if isinstance(event, DisplayOmitted):
                self._count_omission(event)
        if not isinstance(admitted[0], DisplayData):
            return
        display, size = admitted[0], room - budget.left
        if replaced:
            for i in replaced:
                self._kept_size += size - self._sizes[i]
                self._displays[i], self._sizes[i] = display, size
            return
        self._displays.append(display)
        self._sizes.append(size)
        self._kept_size += size
        if display.is_result:
            self._result = display
        text = display.text
        if text is None or display.has_image:
            return
        if not self._text.ends_with_newline:
            self._append("\n")
        self._append(text if text.endswith("\n") else text + "\n")
