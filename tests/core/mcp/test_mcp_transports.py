"""Listing and calling tools of real servers over stdio, Streamable HTTP and SSE."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ipybox_core.errors import McpServerError, McpTimeout, ToolError, UnknownToolError
from ipybox_core.mcp import McpRegistry, StdioServerConfig

pytest_plugins = ["servers.fixtures"]
pytestmark = pytest.mark.asyncio(loop_scope="module")

TRANSPORTS = ["stdio", "http", "sse"]
SECRETS = {"TEST_SECRET": "s3cret-value", "TEST_TOKEN": "tok-123"}


@pytest.fixture(scope="module")
def module_stdio_config() -> dict[str, Any]:
    from servers import PYTHON, SERVE_SCRIPT

    return {
        "command": PYTHON,
        "args": [str(SERVE_SCRIPT), "stdio"],
        "env": {"PYTHONUNBUFFERED": "1", "IPYBOX_SERVER_SECRET": "${TEST_SECRET}"},
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def registry(
    module_stdio_config: dict[str, Any], http_server_url: str, sse_server_url: str
) -> AsyncIterator[McpRegistry]:
    """One registry connected to the test server over all three transports."""
    headers = {"Authorization": "Bearer ${TEST_TOKEN}", "X-Test": "hello"}
    async with McpRegistry(connect_timeout=60, call_timeout=30, environ=SECRETS) as registry:
        await asyncio.gather(
            registry.add("stdio", module_stdio_config),
            registry.add("http", {"url": http_server_url, "headers": headers}),
            registry.add("sse", {"url": sse_server_url, "headers": headers}),
        )
        yield registry


async def wait_for_sleeps(registry: McpRegistry, server: str, condition: Any) -> dict[str, int]:
    """Poll the server's sleep statistics until ``condition(stats)`` holds (at most 20 s)."""
    for _ in range(400):
        stats: dict[str, int] = (await registry.call(server, "sleep_stats")).structured
        if condition(stats):
            return stats
        await asyncio.sleep(0.05)
    raise AssertionError(f"sleep statistics never matched: {stats}")


async def test_same_tools_over_every_transport(registry: McpRegistry) -> None:
    names = {server: [tool.name for tool in registry.tools(server)] for server in TRANSPORTS}
    assert names["stdio"] == names["http"] == names["sse"]
    assert {"create_order", "add", "echo", "image", "date_range", "text.to-upper", "die"} <= set(
        names["stdio"]
    )
    assert set(registry.servers) == set(TRANSPORTS)


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_tool_infos_carry_schemas_and_annotations(registry: McpRegistry, server: str) -> None:
    order = registry.tool(server, "create_order")
    assert order.description.startswith("Create an order")
    assert order.input_schema["type"] == "object"
    assert order.input_schema["required"] == ["customer", "items"]
    assert order.output_schema is not None and "order_id" in order.output_schema["properties"]
    assert order.annotations.title == "Create an order" and order.title == "Create an order"
    assert order.annotations.read_only_hint is False
    assert registry.tool(server, "echo").output_schema is None
    assert set(registry.tool(server, "date_range").input_schema["properties"]) == {"from", "to", "class"}


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_structured_result_with_nested_arguments(registry: McpRegistry, server: str) -> None:
    result = await registry.call(
        server,
        "create_order",
        {
            "customer": {"name": "Ada", "address": {"street": "1 Main", "city": "Paris"}},
            "items": [{"sku": "a", "qty": 2, "unit_price": 1.5}, {"sku": "b"}],
            "priority": "high",
            "tags": ["vip"],
            "note": "gift",
        },
    )
    assert result.structured == {
        "order_id": "ord-2-ada",
        "customer_name": "Ada",
        "city": "Paris",
        "item_count": 3,
        "total": 3.0,
        "priority": "high",
        "tags": ["vip", "note:gift"],
    }
    assert '"order_id": "ord-2-ada"' in result.text


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_primitive_and_keyword_named_arguments(registry: McpRegistry, server: str) -> None:
    added = await registry.call(server, "add", {"a": 40, "b": 2})
    assert added.structured == {"result": 42}
    assert added.text == "42"
    dates = await registry.call(
        server, "date_range", {"from": "2024-01-01", "to": "2024-02-01", "class": "week"}
    )
    assert dates.structured == {"from": "2024-01-01", "to": "2024-02-01", "class": "week"}


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_unstructured_text_result(registry: McpRegistry, server: str) -> None:
    result = await registry.call(server, "echo", {"message": "hello\nworld"})
    assert result.structured is None
    assert result.text == "hello\nworld"
    assert result.content == [{"type": "text", "text": "hello\nworld"}]


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_image_blocks_are_kept_in_wire_form(registry: McpRegistry, server: str) -> None:
    result = await registry.call(server, "image", {"width": 2, "height": 2, "colour": "blue"})
    assert result.text == "blue 2x2"
    caption, image = result.content
    assert caption == {"type": "text", "text": "blue 2x2"}
    assert set(image) == {"type", "data", "mimeType"}
    assert image["type"] == "image" and image["mimeType"] == "image/png"
    assert base64.b64decode(image["data"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert result.images == [image]


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_tool_errors_carry_the_server_message(registry: McpRegistry, server: str) -> None:
    with pytest.raises(ToolError) as error:
        await registry.call(server, "fail", {"kind": "tool_error"})
    assert "the widget is broken" in str(error.value)
    assert (error.value.server, error.value.tool) == (server, "fail")
    with pytest.raises(ToolError, match="values must not be empty"):
        await registry.call(server, "stats", {"values": []})
    with pytest.raises(ToolError, match="validation error"):
        await registry.call(server, "add", {"a": "not a number", "b": 1})


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_protocol_errors_keep_code_and_data(registry: McpRegistry, server: str) -> None:
    with pytest.raises(ToolError) as error:  # a JSON-RPC error from a live server: the tool failed
        await registry.call(server, "fail", {"kind": "protocol"})
    assert not isinstance(error.value, McpServerError)
    assert error.value.code == -32602
    assert error.value.data == {"why": "demo"}
    assert "rejected at protocol level" in str(error.value)
    assert error.value.server == server


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_unknown_tool_and_server(registry: McpRegistry, server: str) -> None:
    with pytest.raises(UnknownToolError, match="no tool 'nope'"):
        await registry.call(server, "nope", {})
    with pytest.raises(UnknownToolError, match="no MCP server 'nope'"):
        await registry.call("nope", "add", {})


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_timeout_then_still_usable(registry: McpRegistry, server: str) -> None:
    with pytest.raises(McpTimeout) as error:
        await registry.call(server, "sleep", {"seconds": 30}, timeout=0.2)
    assert isinstance(error.value, TimeoutError)
    assert "0.2 s" in str(error.value)
    assert (await registry.call(server, "echo", {"message": "after timeout"})).text == "after timeout"
    # the timed-out request was cancelled on the server too
    await wait_for_sleeps(
        registry, server, lambda stats: stats["started"] == stats["finished"] + stats["cancelled"]
    )


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_concurrent_calls_multiplex_on_one_connection(registry: McpRegistry, server: str) -> None:
    before = (await registry.call(server, "sleep_stats")).structured
    pid = (await registry.call(server, "whoami")).structured["pid"]
    calls = [asyncio.create_task(registry.call(server, "sleep", {"seconds": 1.0})) for _ in range(8)]
    # all eight sleeps are running in the server at the same time
    await wait_for_sleeps(registry, server, lambda stats: stats["started"] - stats["finished"] >= 8)
    results = await asyncio.gather(*calls)
    assert [result.text for result in results] == ["slept 1.0"] * 8
    after = (await registry.call(server, "sleep_stats")).structured
    assert after["finished"] - before["finished"] == 8
    assert (await registry.call(server, "whoami")).structured["pid"] == pid


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_cancelling_a_caller_cancels_upstream_and_keeps_the_connection(
    registry: McpRegistry, server: str
) -> None:
    before = (await registry.call(server, "sleep_stats")).structured
    call = asyncio.create_task(registry.call(server, "sleep", {"seconds": 60}))
    await wait_for_sleeps(registry, server, lambda stats: stats["started"] > before["started"])
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await wait_for_sleeps(registry, server, lambda stats: stats["cancelled"] > before["cancelled"])
    assert registry.connection(server).connected
    assert (await registry.call(server, "count")).structured["result"] >= 1


async def test_stdio_server_gets_config_env_but_not_host_env(
    registry: McpRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (await registry.call("stdio", "env_var", {"name": "IPYBOX_SERVER_SECRET"})).structured == {
        "result": "s3cret-value"
    }
    assert (await registry.call("stdio", "env_var", {"name": "PYTEST_CURRENT_TEST"})).structured == {
        "result": None
    }
    assert (await registry.call("stdio", "env_var", {"name": "PATH"})).structured["result"]
    config = registry.connection("stdio").config
    assert isinstance(config, StdioServerConfig) and config.env["IPYBOX_SERVER_SECRET"] == "s3cret-value"


@pytest.mark.parametrize("server", ["http", "sse"])
async def test_http_headers_with_placeholders_reach_the_server(registry: McpRegistry, server: str) -> None:
    who = (await registry.call(server, "whoami")).structured
    assert who["authorization"] == "Bearer tok-123"
    assert who["x-test"] == "hello"


async def test_npm_server_everything_over_stdio(everything_stdio_config: dict[str, Any]) -> None:
    async with McpRegistry(connect_timeout=60) as registry:
        tools = await registry.add("everything", everything_stdio_config)
        names = {tool.name for tool in tools}
        assert {"echo", "get-sum", "get-tiny-image", "get-structured-content"} <= names
        assert (await registry.call("everything", "echo", {"message": "hi"})).text == "Echo: hi"
        assert "3" in (await registry.call("everything", "get-sum", {"a": 1, "b": 2})).text
        image = await registry.call("everything", "get-tiny-image", {})
        assert any(block["type"] == "image" and block["mimeType"] == "image/png" for block in image.content)
        structured = await registry.call("everything", "get-structured-content", {"location": "New York"})
        assert registry.tool("everything", "get-structured-content").output_schema is not None
        assert isinstance(structured.structured, dict) and "temperature" in structured.structured
