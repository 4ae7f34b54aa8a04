"""Helpers for the codegen tests: load tool schemas, generate and import packages, serve calls.

Calls from generated code go through the real kernel-side runtime and the real
:class:`~ipybox_core.toolserver.ToolServer` (on a unix socket, in a background event loop), to a
backend that either answers from a script (recording the arguments) or forwards to a real
in-process MCP server.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pytest

from ipybox_core import runtime
from ipybox_core.approval import ApprovalGate
from ipybox_core.codegen import GeneratedPackage, generate_server_package
from ipybox_core.errors import ToolError, UnknownToolError
from ipybox_core.mcp.types import ToolInfo
from ipybox_core.toolserver import ToolServer

DATA = Path(__file__).parent / "data"
_counter = itertools.count()


def load_tools(name: str) -> list[ToolInfo]:
    """Tools from ``data/<name>`` (``tools/list`` entries in wire form)."""
    return [
        ToolInfo(
            name=t["name"],
            description=t.get("description", ""),
            input_schema=t["inputSchema"],
            output_schema=t.get("outputSchema"),
            title=t.get("title"),
        )
        for t in json.loads((DATA / name).read_text())
    ]


def tool(
    name: str, properties: dict[str, Any] | None = None, required: list[str] | None = None, **extra: Any
) -> ToolInfo:
    """A tool with an object input schema (``input_schema=`` overrides it)."""
    schema = extra.pop("input_schema", None)
    if schema is None:
        schema = {"type": "object", "properties": properties or {}}
        if required:
            schema["required"] = required
    return ToolInfo(name=name, input_schema=schema, **extra)


@dataclass
class Imported:
    package: GeneratedPackage
    module: ModuleType
    root_name: str

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)


class Generator:
    """Generates packages under unique root names in one directory and imports them in-process."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.roots: list[str] = []
        sys.path.insert(0, str(directory))

    def __call__(self, server: str, tools: list[ToolInfo]) -> Imported:
        root_name = f"mcpt{os.getpid()}_{next(_counter)}"
        self.roots.append(root_name)
        package = generate_server_package(server, tools, self.directory / root_name)
        importlib.invalidate_caches()
        module = importlib.import_module(f"{root_name}.{package.module}")
        return Imported(package, module, root_name)

    def close(self) -> None:
        for name in list(sys.modules):
            if name.split(".")[0] in self.roots:
                del sys.modules[name]
        if str(self.directory) in sys.path:
            sys.path.remove(str(self.directory))


@dataclass
class Outcome:
    structured: Any = None
    content: list[dict[str, Any]] = field(default_factory=list)
    notices: tuple[str, ...] = ()


Handler = Callable[[str, str, dict[str, Any]], Awaitable[Outcome]]


class Backend:
    """The tool server's backend: a scripted answer per call, or a forwarder to a real MCP server."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.reply: Outcome = Outcome(content=[{"type": "text", "text": "ok"}])
        self.handlers: dict[str, Handler] = {}
        """Per MCP server name: where its calls go (the other servers get ``reply``)."""

    def tool(self, server: str, tool: str) -> ToolInfo:
        if not tool:
            raise UnknownToolError("no tool name")
        return ToolInfo(name=tool)

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> Outcome:
        self.calls.append((server, tool, arguments))
        handler = self.handlers.get(server)
        if handler is not None:
            return await handler(server, tool, arguments)
        return self.reply


class ThreadedToolServer:
    """The real ToolServer on a unix socket, served from an event loop in a background thread."""

    def __init__(self, directory: Path) -> None:
        self.backend = Backend()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="codegen-toolserver", daemon=True)
        self._thread.start()
        self.server = ToolServer(self.backend, ApprovalGate("never"), heartbeat=0.5)
        self.run(self.server.start_unix(directory / "tools.sock"))
        os.environ["IPYBOX_TOOL_SERVER"] = self.server.address
        os.environ["IPYBOX_TOOL_TOKEN"] = self.server.token

    def run(self, coroutine: Awaitable[Any]) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)  # type: ignore[arg-type]
        return future.result(timeout=30)

    def close(self) -> None:
        self.run(self.server.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
        runtime._drop_connection()
        os.environ.pop("IPYBOX_TOOL_SERVER", None)
        os.environ.pop("IPYBOX_TOOL_TOKEN", None)


def one(generate: Generator, info: ToolInfo) -> Any:
    """Generate a server with the single tool ``info``; return its function."""
    imported = generate("srv", [info])
    return getattr(imported.module, imported.package.tools[0].function)


def sent(served: ThreadedToolServer, fn: Any, **kwargs: Any) -> dict[str, Any]:
    """Call ``fn`` through the real tool server and return the arguments that arrived there."""
    fn(**kwargs)
    return served.backend.calls[-1][2]


@contextmanager
def mcp_forwarding(served: ThreadedToolServer, name: str, mcp_server: Any) -> Iterator[None]:
    """Forward calls for server ``name`` to a real in-process MCP server (``mcp.Client``)."""
    from mcp import Client

    ready: Future[None] = Future()
    stop = asyncio.Event()

    async def own_client() -> None:  # one task owns the client for its whole life
        async with Client(mcp_server) as client:

            async def handle(server: str, tool: str, arguments: dict[str, Any]) -> Outcome:
                result = await client.call_tool(tool, arguments)
                content = [
                    c.model_dump(by_alias=True, mode="json", exclude_none=True) for c in result.content
                ]
                if result.is_error:
                    text = " ".join(c.get("text", "") for c in content)
                    raise ToolError(text, server=server, tool=tool)
                return Outcome(structured=result.structured_content, content=content)

            served.backend.handlers[name] = handle
            ready.set_result(None)
            await stop.wait()

    task = asyncio.run_coroutine_threadsafe(own_client(), served.loop)
    ready.result(timeout=30)
    try:
        yield
    finally:
        served.backend.handlers.pop(name, None)
        served.loop.call_soon_threadsafe(stop.set)
        task.result(timeout=30)


# --- fixtures: a test module binds them with ``served = served_fixture()`` ------------------------


def served_fixture() -> Any:
    """A module-scoped fixture: the real tool server; generated code calls through it."""

    @pytest.fixture(scope="module")
    def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedToolServer]:
        server = ThreadedToolServer(tmp_path_factory.mktemp("sock"))
        yield server
        server.close()

    return served


def generate_fixture(scope: Literal["function", "module"] = "function") -> Any:
    """A fixture that generates packages and imports them in-process (cleaned up afterwards)."""

    @pytest.fixture(scope=scope)
    def generate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Generator]:
        generator = Generator(tmp_path_factory.mktemp("gen"))
        yield generator
        generator.close()

    return generate
