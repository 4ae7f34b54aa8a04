"""What an execution streams: output chunks, rich displays, approval requests, the final result."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import CodeError


@dataclass(frozen=True)
class OutputChunk:
    """Incremental stdout/stderr text, as the code prints it."""

    text: str
    stream: Literal["stdout", "stderr"] = "stdout"


@dataclass(frozen=True)
class DisplayOutput:
    """A rich output as it appears (a plot, HTML, markdown): a MIME bundle."""

    data: Mapping[str, Any]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def png(self) -> bytes | None:
        """The PNG image, decoded, if the bundle has one."""
        value = self.data.get("image/png")
        return base64.b64decode(value) if isinstance(value, str) else None

    @property
    def text(self) -> str:
        """The plain-text representation."""
        value = self.data.get("text/plain", "")
        return value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class ExecutionResult:
    """The outcome of one execution.

    ``text`` is everything the code printed plus the value of its last expression (head and tail
    kept when longer than the output limit, with a marker saying how much was cut); ``images`` are
    the PNG images it displayed; ``error`` is ``None`` or the exception the code raised, with a
    readable traceback. Timeouts and kernel deaths are raised, not returned.
    """

    text: str
    images: list[bytes] = field(default_factory=list)
    error: CodeError | None = None
    displays: list[DisplayOutput] = field(default_factory=list)
    execution_count: int | None = None
    omitted_chars: int = 0
    """Characters of output cut from the middle of ``text`` to respect the output limit."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def raise_for_error(self) -> ExecutionResult:
        """Raise :class:`CodeError` if the code failed; return self otherwise."""
        if self.error is not None:
            raise self.error
        return self

    def to_text(self) -> str:
        """Text for a language model: the output, then the traceback if the code failed."""
        parts = [self.text.rstrip("\n")] if self.text.strip() else []
        if self.error is not None:
            parts.append(self.error.traceback or f"{self.error.ename}: {self.error.evalue}")
        if not parts:
            parts.append("(no output)" if not self.images else f"({len(self.images)} image(s))")
        return "\n".join(parts)


ExecutionEvent: TypeAlias = OutputChunk | DisplayOutput | ApprovalRequest | ExecutionResult
"""Everything :meth:`CodeExecutor.stream` yields; the last event is always an :class:`ExecutionResult`."""
