"""The code's output, sent to the MCP client as it is printed: progress notifications of the call."""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from ipybox_core import protocol

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context

    from ipybox_core.executor import OutputChunk


class OutputRelay:
    """Sends each output chunk of an ``execute_code`` round as a ``notifications/progress`` of the
    request, when the client asked for progress (a ``progressToken``): the ``message`` is the text,
    or ``{"stream", "text"}`` as JSON for a client that set ``ipybox.dev/output``.

    ``progress`` is the number of characters sent so far; the round's result reports the total
    (``ipybox.dev/streamed``). At most ``limit`` characters are sent: the result has the head and
    tail of longer output.
    """

    def __init__(self, ctx: Context[Any, Any], *, limit: int) -> None:
        meta = ctx.request_context.meta
        self._ctx = ctx
        self._on = protocol.meta_value(meta, "progress_token") is not None or (
            protocol.meta_value(meta, "progressToken") is not None
        )
        self._as_json = protocol.meta_value(meta, protocol.OUTPUT) is True
        self._room = limit
        self.sent = 0
        """Characters sent in this round."""

    async def send(self, chunk: OutputChunk) -> None:
        if not self._on or self._room <= 0:
            return
        text = chunk.text[: self._room]
        self._room -= len(text)
        self.sent += len(text)
        message = json.dumps({"stream": chunk.stream, "text": text}) if self._as_json else text
        with contextlib.suppress(Exception):  # the client went away: the request ends anyway
            await self._ctx.report_progress(self.sent, None, message)
