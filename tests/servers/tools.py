"""The tool set of the test MCP server, identical over stdio, Streamable HTTP and SSE.

Every tool exists to exercise one thing a client (or code generator) must get right; the docstring
of each tool says which.
"""

from __future__ import annotations

import asyncio
import functools
import os
import struct
import zlib
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any, Literal, TypedDict, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver import Context, Image
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

_F = TypeVar("_F", bound=Callable[..., Any])


class Priority(StrEnum):
    low = "low"
    normal = "normal"
    high = "high"


class Address(BaseModel):
    street: str
    city: str
    zip: str | None = None


class Customer(BaseModel):
    name: str
    email: str | None = None
    address: Address


class LineItem(BaseModel):
    sku: str
    qty: int = Field(default=1, ge=1)
    unit_price: float = 0.0


class OrderForm(BaseModel):
    """The form ``confirm_order`` asks the user to fill in (every field has a default)."""

    quantity: int = Field(default=1, ge=1, le=10)
    gift: bool = False
    shipping: Literal["standard", "express"] = "standard"


class OrderSummary(BaseModel):
    """The structured result of ``create_order``."""

    order_id: str
    customer_name: str
    city: str
    item_count: int
    total: float
    priority: Priority
    tags: list[str]


class Stats(TypedDict):
    count: int
    mean: float
    minimum: float
    maximum: float


class SleepStats(TypedDict):
    started: int
    finished: int
    cancelled: int


def keyword_params(**python_to_alias: str) -> Callable[[_F], _F]:
    """Let a tool take parameters named like Python keywords (``from``, ``class``).

    MCPServer builds the input schema from the aliases but then calls the function with the alias as
    the keyword; ``functools.wraps`` keeps the real signature visible while the wrapper renames the
    keys back.
    """
    alias_to_python = {alias: name for name, alias in python_to_alias.items()}

    def decorate(fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> Any:
            return fn(**{alias_to_python.get(key, key): value for key, value in kwargs.items()})

        return wrapper  # type: ignore[return-value]

    return decorate


def solid_png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A valid PNG of one colour, built with the standard library only."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


COLOURS: dict[str, tuple[int, int, int]] = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}


def build_server(name: str = "ipybox-test") -> MCPServer:
    """The test server; each process has its own counters and sleep statistics."""
    mcp = MCPServer(name, version="1.0.0", instructions="ipybox test server", log_level="WARNING")
    counters: dict[str, int] = {}
    sleeps = SleepStats(started=0, finished=0, cancelled=0)

    @mcp.tool(
        annotations=ToolAnnotations(title="Create an order", read_only_hint=False, idempotent_hint=False)
    )
    def create_order(
        customer: Customer,
        items: list[LineItem],
        priority: Priority = Priority.normal,
        tags: list[str] = [],  # noqa: B006 - pydantic copies defaults
        note: str | None = None,
    ) -> OrderSummary:
        """Create an order from a nested customer object and an array of line items."""
        return OrderSummary(
            order_id=f"ord-{len(items)}-{customer.name.lower()}",
            customer_name=customer.name,
            city=customer.address.city,
            item_count=sum(item.qty for item in items),
            total=round(sum(item.qty * item.unit_price for item in items), 2),
            priority=priority,
            tags=tags + ([f"note:{note}"] if note else []),
        )

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def stats(values: list[float], mode: Literal["sample", "population"] = "sample") -> Stats:
        """Summary statistics of numbers (TypedDict output); a ToolError for an empty list."""
        if not values:
            raise ToolError("values must not be empty")
        return Stats(
            count=len(values), mean=sum(values) / len(values), minimum=min(values), maximum=max(values)
        )

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers (primitive output, wrapped as {"result": ...})."""
        return a + b

    @mcp.tool(name="text.to-upper")
    def to_upper(text: str, repeat: int = 1) -> str:
        """Upper-case a text; the tool name contains '.' and '-'."""
        return text.upper() * repeat

    @mcp.tool(name="date_range")
    @keyword_params(from_="from", class_="class")
    def date_range(
        from_: Annotated[str, Field(alias="from", description="start date, ISO")],
        to: Annotated[str, Field(description="end date, ISO")],
        class_: Annotated[Literal["day", "week"], Field(alias="class")] = "day",
    ) -> dict[str, str]:
        """Parameters named ``from`` and ``class`` (Python keywords)."""
        return {"from": from_, "to": to, "class": class_}

    @mcp.tool(structured_output=False)
    def echo(message: str) -> str:
        """Return the message as plain text (no output schema)."""
        return message

    @mcp.tool(structured_output=False)
    def image(width: int = 4, height: int = 3, colour: Literal["red", "green", "blue"] = "red") -> list[Any]:
        """A caption and a PNG image of one colour."""
        return [
            f"{colour} {width}x{height}",
            Image(data=solid_png(width, height, COLOURS[colour]), format="png"),
        ]

    @mcp.tool()
    def fail(kind: Literal["tool_error", "crash", "protocol"] = "tool_error") -> str:
        """Fail as a tool error (message visible), a crash (message hidden) or a JSON-RPC error."""
        if kind == "tool_error":
            raise ToolError("the widget is broken")
        if kind == "crash":
            raise ValueError("secret internal detail")
        raise MCPError(INVALID_PARAMS, "rejected at protocol level", {"why": "demo"})

    @mcp.tool()
    async def sleep(seconds: float) -> str:
        """Sleep, counting started, finished and cancelled sleeps (see ``sleep_stats``)."""
        sleeps["started"] += 1
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            sleeps["cancelled"] += 1
            raise
        sleeps["finished"] += 1
        return f"slept {seconds}"

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def sleep_stats() -> SleepStats:
        """How many sleeps started, finished and were cancelled in this server process."""
        return SleepStats(**sleeps)

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def env_var(name: str) -> str | None:
        """The value of an environment variable in the server process (None if unset)."""
        return os.environ.get(name)

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami(ctx: Context) -> dict[str, Any]:
        """The server's pid and selected HTTP request headers (None over stdio)."""
        headers = ctx.headers
        return {
            "pid": os.getpid(),
            "authorization": headers.get("authorization") if headers else None,
            "x-test": headers.get("x-test") if headers else None,
        }

    @mcp.tool()
    def count(tag: str = "") -> int:
        """Increment and return this server process's counter for ``tag`` (a counter per tag)."""
        counters[tag] = counters.get(tag, 0) + 1
        return counters[tag]

    @mcp.tool(annotations=ToolAnnotations(destructive_hint=True))
    def die(code: int = 3, message: str = "dying on request") -> str:
        """Write a message to stderr and kill the server process immediately."""
        os.write(2, f"{message}\n".encode())
        os._exit(code)

    @mcp.tool()
    async def confirm_order(item: str, ctx: Context, chatter: int = 0, note: str = "") -> str:
        """Ask the user (elicitation, a form with defaults) how many of ``item`` to order (after
        ``chatter`` log messages; ``note`` is added to the question)."""
        for index in range(chatter):
            await ctx.info(f"chatter {index + 1}")
        answer = await ctx.elicit(f"How many {item} should I order?{note}", OrderForm)
        if answer.action != "accept":
            return f"order {answer.action}d"
        form = answer.data
        return f"ordered {form.quantity} x {item} ({'gift' if form.gift else 'no gift'}, {form.shipping})"

    @mcp.tool()
    async def link_account(ctx: Context) -> str:
        """Ask the user to open a URL (a URL-mode elicitation) and say whether they agreed."""
        answer = await ctx.elicit_url("Link your account", "https://accounts.example/link?id=7", "link-7")
        return f"link {answer.action}"

    @mcp.tool()
    async def summarize(text: str, ctx: Context) -> str:
        """Ask the client's LLM (sampling) for a one-line summary of ``text``."""
        result = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=text))], max_tokens=50
        )
        content = result.content
        return f"{result.model}: {content.text if isinstance(content, TextContent) else content}"

    @mcp.tool()
    async def client_roots(ctx: Context) -> list[str]:
        """The roots the client answers ``roots/list`` with (their URIs)."""
        return [str(root.uri) for root in (await ctx.session.list_roots()).roots]

    @mcp.tool()
    async def chatty(lines: int = 3, fail: bool = False, ctx: Context | None = None) -> str:
        """Send ``lines`` log messages and as many progress notifications, then answer (or fail)."""
        assert ctx is not None
        for index in range(lines):
            await ctx.info(f"step {index + 1} of {lines}")
            await ctx.report_progress(index + 1, lines, f"step {index + 1}")
        if fail:
            raise ToolError("chatty failed after its messages")
        return "done"

    return mcp
