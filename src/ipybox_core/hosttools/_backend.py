"""The tool server's backend with host tools: :data:`HOST_SERVER` runs here, the rest goes to MCP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from ipybox_core.errors import McpTimeout, ToolError, UnknownToolError
from ipybox_core.hosttools._tool import HOST_SERVER, HostCall, HostTool
from ipybox_core.mcp.types import ToolInfo
from ipybox_core.toolserver import ToolBackend


class HostTools:
    """The host tools of one executor (or of a ``Sessions`` and its executors), by name."""

    def __init__(self, tools: Iterable[HostTool] = ()) -> None:
        self._tools: dict[str, HostTool] = {}
        self.replace(tools)

    def replace(self, tools: Iterable[HostTool]) -> None:
        """Use ``tools`` from now on (a name given twice: the last one)."""
        self._tools = {tool.name: tool for tool in tools}

    def __bool__(self) -> bool:
        return bool(self._tools)

    def __iter__(self) -> Iterator[HostTool]:
        return iter(list(self._tools.values()))

    def get(self, name: str) -> HostTool:
        """The tool named ``name``; raises :class:`UnknownToolError`."""
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools)) or "none"
            raise UnknownToolError(f"no host tool {name!r} is registered (tools: {known})") from None

    def infos(self) -> list[ToolInfo]:
        """Every tool as code generation sees it."""
        return [tool.info() for tool in self._tools.values()]


@dataclass(frozen=True)
class HostOutcome:
    """A host tool's result in the tool server's terms (``ToolCallOutcome``)."""

    structured: Any
    content: list[dict[str, Any]]
    notices: tuple[str, ...] = field(default=())


class HostBackend:
    """Serves :data:`HOST_SERVER` from ``tools`` (each call gets ``context()``, the execution's
    binding) and every other server from ``mcp``."""

    def __init__(
        self, tools: HostTools, mcp: ToolBackend, *, context: Callable[[], Any], call_timeout: float | None
    ) -> None:
        self._tools = tools
        self._mcp = mcp
        self._context = context
        self._call_timeout = call_timeout

    def tool(self, server: str, tool: str) -> ToolInfo:
        if server == HOST_SERVER and self._tools:
            return self._tools.get(tool).info()
        return self._mcp.tool(server, tool)

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Any:
        if server != HOST_SERVER or not self._tools:
            return await self._mcp.call(server, tool, arguments)
        host = self._tools.get(tool)
        value = await run_host_call(host, HostCall(tool, arguments, self._context()), self._call_timeout)
        return outcome(host, value)


async def run_host_call(tool: HostTool, call: HostCall, call_timeout: float | None) -> Any:
    """Run ``call`` of ``tool`` within its timeout (``call_timeout`` when it has none); returns what
    the tool returned. Raises :class:`McpTimeout` when it takes too long and :class:`ToolError` with
    the tool's message when it raises."""
    timeout = tool.timeout if tool.timeout is not None else call_timeout
    try:
        async with asyncio.timeout(timeout):
            return await tool.run(call)
    except McpTimeout:  # a tool that reports a timeout of its own (e.g. one run elsewhere)
        raise
    except TimeoutError:
        raise McpTimeout(
            f"host tool {tool.name!r} did not finish within {timeout:g} s", server=HOST_SERVER
        ) from None
    except ToolError:
        raise
    except Exception as error:
        raise ToolError(_message(error), server=HOST_SERVER, tool=tool.name) from error


def json_data(tool: HostTool, value: Any) -> Any:
    """``value``, what ``tool`` returned, as JSON data; raises :class:`ToolError` if it is none."""
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as error:
        raise ToolError(
            f"host tool {tool.name!r} returned a {type(value).__name__}, which is not JSON data ({error})",
            server=HOST_SERVER,
            tool=tool.name,
        ) from None


def outcome(tool: HostTool, value: Any) -> HostOutcome:
    """``value`` as JSON data: structured (wrapped as ``{"result": ...}`` when the tool's result is
    not an object) and as one text block."""
    data = json_data(tool, value)
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    structured = {"result": data} if tool.wraps_result else data
    return HostOutcome(structured, [{"type": "text", "text": text}])


def _message(error: Exception) -> str:
    return str(error) or type(error).__name__
