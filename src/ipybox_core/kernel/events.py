"""Typed events of one execution, yielded by :meth:`Kernel.execute` as they happen."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

StreamName: TypeAlias = Literal["stdout", "stderr"]
ExecutionStatus: TypeAlias = Literal["ok", "error", "aborted"]


@dataclass(frozen=True)
class StreamText:
    """A chunk of text the code wrote to stdout or stderr (also output of ``!cmd`` and subprocesses)."""

    name: StreamName
    text: str


@dataclass(frozen=True)
class DisplayData:
    """Rich output: a ``display(...)`` call, a matplotlib figure, or the cell's result value.

    ``data`` is the MIME bundle (``"text/plain"``, ``"image/png"`` as base64, ``"text/html"``, ...).
    ``is_result`` is true for the value of the cell's last expression (``Out[n]``).
    """

    data: Mapping[str, Any]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    is_result: bool = False
    display_id: str | None = None
    """Set for ``display(..., display_id=...)``; updates of that display carry the same id."""
    is_update: bool = False
    """True when this replaces an earlier display with the same ``display_id``."""

    @property
    def png(self) -> bytes | None:
        """The PNG image, decoded, if the bundle has one."""
        return self._image("image/png")

    @property
    def jpeg(self) -> bytes | None:
        """The JPEG image, decoded, if the bundle has one."""
        return self._image("image/jpeg")

    @property
    def has_image(self) -> bool:
        """Whether the bundle carries an image of any type."""
        return any(mime.startswith("image/") for mime in self.data)

    @property
    def text(self) -> str | None:
        """The best text form: markdown if present, else plain text."""
        for mime in ("text/markdown", "text/plain"):
            value = self.data.get(mime)
            if isinstance(value, str):
                return value
        return None

    @property
    def html(self) -> str | None:
        """The HTML form, if any."""
        value = self.data.get("text/html")
        return value if isinstance(value, str) else None

    def _image(self, mime: str) -> bytes | None:
        value = self.data.get(mime)
        if not isinstance(value, str):
            return None
        try:
            return base64.b64decode(value)
        except (binascii.Error, ValueError):
            return None


@dataclass(frozen=True)
class ClearOutput:
    """The code cleared its output so far (``IPython.display.clear_output``)."""

    wait: bool = False


@dataclass(frozen=True)
class ExecutionError:
    """The code raised an exception.

    ``traceback`` is readable text: no ANSI escape codes, ipybox-internal frames removed.
    """

    ename: str
    evalue: str
    traceback: str


@dataclass(frozen=True)
class OutputTruncated:
    """Stream text was dropped to respect the output limit.

    After the first ``output_limit`` characters of stream text, :meth:`Kernel.execute` stops
    yielding stream text and only keeps the last part; at the end it yields this event, then that
    last part as :class:`StreamText`.
    """

    omitted_chars: int


@dataclass(frozen=True)
class DisplayOmitted:
    """Rich output was dropped to respect the output limit.

    The MIME data and metadata of every display (and update, and result value) of one execution
    share one budget: ``output_limit`` plus 4,000,000 characters (base64 for images), so that
    ordinary plots always arrive. What does not fit is dropped, the smallest MIME parts of a
    display kept first; this event says what went missing.
    """

    displays: int = 0
    """Displays dropped whole."""
    trimmed: int = 0
    """Displays that lost some of their MIME parts (the rest was delivered)."""
    size: int = 0
    """Characters of MIME data and metadata dropped (base64 for images)."""
    mime_types: tuple[str, ...] = ()
    """The MIME types that were dropped."""


@dataclass(frozen=True)
class ExecutionFinished:
    """The last event of every execution that ran to its end."""

    status: ExecutionStatus
    execution_count: int | None
    duration: float
    """Seconds from sending the code until the kernel was idle again."""


KernelEvent: TypeAlias = (
    StreamText
    | DisplayData
    | ClearOutput
    | ExecutionError
    | OutputTruncated
    | DisplayOmitted
    | ExecutionFinished
)
"""Everything :meth:`Kernel.execute` can yield."""
