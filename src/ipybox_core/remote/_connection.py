"""One MCP connection to an ipybox service, and ``execute_code`` rounds over it."""

from __future__ import annotations

import contextlib
import os
import re
import socket
from collections.abc import Mapping
from typing import Any, cast

import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, ElicitResult, InputRequiredResult, InputResponses, RequestParamsMeta

from ipybox_core import protocol
from ipybox_core.errors import ExecutionGone, ServiceError

TOKEN_ENV = "IPYBOX_MCP_TOKEN"
Round = CallToolResult | InputRequiredResult
GONE = "the execution waiting for this approval is gone (the ipybox service restarted or forgot it)"
_NAME = re.compile(r"[^A-Za-z0-9._~-]")


def default_client_name() -> str:
    """``<host>-<pid>``: the name the service's audit log records for this process's decisions."""
    return _NAME.sub("-", f"{socket.gethostname()}-{os.getpid()}")[:128]


class ServiceConnection:
    """An authenticated MCP client of ``url`` (protocol 2026-07-28) that runs ``execute_code`` rounds."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None,
        client_name: str,
        connect_timeout: float = 30.0,
    ) -> None:
        self.url = url
        self.client_name = client_name
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # No read timeout: a round lasts as long as the code runs (the service bounds it).
        http = create_mcp_http_client(headers=headers, timeout=httpx2.Timeout(connect_timeout, read=None))
        self._client = Client(
            streamable_http_client(url, http_client=http), mode="auto", elicitation_callback=_never_inline
        )
        self._stack = contextlib.AsyncExitStack()

    async def open(self) -> None:
        try:
            await self._stack.enter_async_context(self._client)
        except Exception as error:
            await self._stack.aclose()
            raise ServiceError(
                f"cannot connect to the ipybox service at {self.url}: {_reason(error)}"
            ) from None

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._stack.aclose()

    async def execute(
        self,
        session: str,
        *,
        arguments: Mapping[str, Any],
        call: str | None = None,
        resume: bool = False,
        input_responses: InputResponses | None = None,
        request_state: str | None = None,
    ) -> Round:
        """One ``tools/call execute_code`` round for ``session``."""
        meta: dict[str, Any] = {protocol.SESSION: session, protocol.CLIENT: self.client_name}
        if call is not None:
            meta[protocol.CALL] = call
        if resume:
            meta[protocol.RESUME] = True
        try:
            result: Round = await self._client.session.call_tool(
                "execute_code",
                dict(arguments),
                input_responses=input_responses,
                request_state=request_state,
                meta=cast(RequestParamsMeta, meta),
                allow_input_required=True,
            )
        except Exception as error:
            reason = _reason(error)
            if request_state is not None and "requestState" in reason:  # the service restarted since
                raise ExecutionGone(f"{GONE}: {reason}") from None
            raise ServiceError(f"the ipybox service at {self.url} failed the request: {reason}") from None
        return result

    async def call_tool(self, session: str, name: str, arguments: Mapping[str, Any]) -> str:
        """Call one of the service's other tools for ``session``; returns its text."""
        meta = {protocol.SESSION: session, protocol.CLIENT: self.client_name}
        try:
            result = await self._client.session.call_tool(
                name, dict(arguments), meta=cast(RequestParamsMeta, meta)
            )
        except Exception as error:
            raise ServiceError(f"the ipybox service at {self.url} failed {name}: {_reason(error)}") from None
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            raise ServiceError(f"the ipybox service refused {name}: {text}")
        return text


async def _never_inline(context: Any, params: Any) -> ElicitResult:
    """Declares elicitation support; on protocol 2026-07-28 questions come back as rounds instead."""
    return ElicitResult(action="decline", content={"reason": "this client answers approvals as rounds"})


def _reason(error: BaseException) -> str:
    status = getattr(getattr(error, "response", None), "status_code", None)
    if status == 401:
        return "the service refused the token (401): pass token= or set IPYBOX_MCP_TOKEN"
    text = str(error) or type(error).__name__
    if isinstance(error, BaseExceptionGroup):
        text = "; ".join(_reason(inner) for inner in error.exceptions)
    return text
