"""What an MCP server asks of, or tells, its client during a call: the SDK client's callbacks.

- ``elicitation/create`` (form mode) goes to the application's ``elicit`` callback; the answer is
  completed with the schema's defaults and validated before it is sent back; without a callback
  the question is declined and the calling code is told why. While the application answers, the
  call timeout of the server's running calls stands still (:class:`CallClock`).
- ``sampling/createMessage`` goes to the application's ``sample`` callback, else is refused with an
  error naming the option.
- ``roots/list`` is answered with the configured roots (the executor's workspace by default).
- log and progress notifications become notices on the code's stderr, ``[mcp:<server>] ...``,
  at most :data:`MAX_NOTICES` per call (then one line saying how many were left out).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientRequestContext
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    ListRootsResult,
    LoggingMessageNotificationParams,
    Root,
)
from pydantic import FileUrl

from ipybox_core.errors import McpTimeout
from ipybox_core.mcp.elicitation import (
    Elicit,
    ElicitationContentError,
    ElicitationRequest,
    complete_content,
)
from ipybox_core.mcp.sampling import Sample, SamplingRequest, not_configured

MAX_NOTICES = 20
"""Log and progress lines one call prints at most; a chatty server's further lines are counted."""
MAX_NOTICE_CHARS = 500
LOG_LEVEL = "info"
"""The least severe log messages a 2026-07-28 server is asked to send (legacy servers choose)."""

_log = logging.getLogger(__name__)


class CallClock:
    """One call's timeout, spent only while no question of its server waits for the application."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.scope = anyio.CancelScope(deadline=math.inf if limit is None else anyio.current_time() + limit)
        self._left = math.inf
        self._pauses = 0

    def pause(self) -> None:
        if not self._pauses:
            self._left = self.scope.deadline - anyio.current_time()
            self.scope.deadline = math.inf
        self._pauses += 1

    def resume(self) -> None:
        self._pauses -= 1
        if not self._pauses:
            self.scope.deadline = anyio.current_time() + self._left


class UpstreamRequests:
    """The server-to-client side of one MCP server's connection."""

    def __init__(
        self,
        server: str,
        *,
        elicit: Elicit | None = None,
        sample: Sample | None = None,
        roots: Sequence[str | Path] | None = None,
    ) -> None:
        self.server = server
        self.elicit = elicit
        self.sample = sample
        self.roots = roots
        self._calls: list[str] = []
        self._clocks: list[CallClock] = []
        self._notices: list[str] = []
        self._dropped = 0

    # --- which call a request belongs to, and what it is told ------------------------------------

    @contextlib.contextmanager
    def calling(self, tool: str, limit: float | None = None) -> Iterator[None]:
        """Mark a call of ``tool`` as running while the block runs, within ``limit`` seconds (not
        counting the time the application takes to answer the server's questions).

        Raises:
            McpTimeout: the call took longer (the block is cancelled, so is its request upstream).
        """
        clock = CallClock(limit)
        self._calls.append(tool)
        self._clocks.append(clock)
        try:
            with clock.scope:
                yield
        finally:
            self._calls.remove(tool)
            self._clocks.remove(clock)
        if clock.scope.cancelled_caught:
            assert limit is not None
            raise McpTimeout(
                f"MCP server {self.server!r}: tool {tool!r} did not answer within {limit:g} s",
                server=self.server,
            )

    @contextlib.contextmanager
    def _answering(self) -> Iterator[None]:
        """The running calls' clocks stand still while the block runs (the application answers)."""
        clocks = list(self._clocks)
        for clock in clocks:
            clock.pause()
        try:
            yield
        finally:
            for clock in clocks:
                clock.resume()

    def current_tool(self) -> str | None:
        """The tool being called, when all running calls are calls of one tool."""
        return self._calls[0] if self._calls and len(set(self._calls)) == 1 else None

    def notice(self, line: str, *, always: bool = False) -> None:
        """A line for the code's stderr (bounded: a chatty server's extra lines are only counted,
        unless the line is ipybox's own and ``always``)."""
        if len(self._notices) >= MAX_NOTICES and not always:
            self._dropped += 1
            return
        self._notices.append(f"[mcp:{self.server}] {_shortened(line, MAX_NOTICE_CHARS)}")

    def take_notices(self) -> tuple[str, ...]:
        """The notices gathered since the last call, for the result of the call that ends now."""
        notices, self._notices = self._notices, []
        if self._dropped:
            notices.append(f"[mcp:{self.server}] ... {self._dropped} more log/progress messages left out")
            self._dropped = 0
        return tuple(notices)

    # --- the SDK client's callbacks --------------------------------------------------------------

    def client_options(self) -> dict[str, Any]:
        """The ``mcp.Client`` keyword arguments that install these callbacks."""
        return {
            "elicitation_callback": self.on_elicitation,
            "sampling_callback": self.on_sampling,
            "list_roots_callback": self.on_list_roots,
            "logging_callback": self.on_log,
            "log_level": LOG_LEVEL,  # 2026-07-28 servers log only to a client that asks for a level
        }

    async def on_elicitation(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        tool = self.current_tool()
        during = f" during {tool!r}" if tool else ""
        if self.elicit is None:
            self.notice(
                f"the server asked a question{during} ({_shortened(params.message, 200)!r}) and it was "
                "declined: no elicitation handler is configured (McpRegistry(elicit=...), "
                "CodeExecutor(mcp_elicit=...))",
                always=True,
            )
            return ElicitResult(action="decline")
        if params.mode == "url":
            request = ElicitationRequest(
                server=self.server, tool=tool, message=params.message, schema={}, url=params.url
            )
        else:
            request = ElicitationRequest(
                server=self.server, tool=tool, message=params.message, schema=params.requested_schema
            )
        try:
            with self._answering():
                answer = await self.elicit(request)
        except Exception as exc:  # the application's handler failed: the server gets an error
            return self._failed("elicit", exc)
        if answer.reason is not None:  # ipybox answered on the user's behalf: say why
            self.notice(
                f"the server asked a question{during} ({_shortened(params.message, 200)!r}) and it was "
                f"declined: {answer.reason}",
                always=True,
            )
        if answer.action != "accept" or params.mode == "url":  # URL mode: consent only, no content
            return ElicitResult(action=answer.action)
        try:
            content = complete_content(params.requested_schema, answer.content)
        except ElicitationContentError as exc:
            return ErrorData(
                code=INVALID_PARAMS,
                message=f"ipybox: the application's answer does not match the requested schema: {exc}",
            )
        return ElicitResult(action="accept", content=content)

    async def on_sampling(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | ErrorData:
        if self.sample is None:
            return ErrorData(code=INVALID_REQUEST, message=not_configured(self.server))
        request = SamplingRequest(server=self.server, tool=self.current_tool(), params=params)
        try:
            return await self.sample(request)
        except Exception as exc:
            return self._failed("sample", exc)

    def _failed(self, option: str, exc: Exception) -> ErrorData:
        _log.warning("the %s callback failed for MCP server %r: %r", option, self.server, exc)
        message = f"ipybox: the application's {option} callback failed: {exc}"
        return ErrorData(code=INTERNAL_ERROR, message=message)

    async def on_list_roots(self, context: ClientRequestContext) -> ListRootsResult:
        roots = []
        for root in self.roots or ():
            uri = str(root) if "://" in str(root) else Path(root).resolve().as_uri()
            roots.append(Root(uri=FileUrl(uri), name=Path(str(root)).name or None))
        return ListRootsResult(roots=roots)

    async def on_log(self, params: LoggingMessageNotificationParams) -> None:
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        logger = f" {params.logger}:" if params.logger else ""
        self.notice(f"{params.level}:{logger} {data}")

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        amount = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
        self.notice(f"progress {amount}" + (f": {message}" if message else ""))


def _shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
