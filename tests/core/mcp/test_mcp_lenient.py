"""Off-spec servers: malformed tools are repaired or left out, off-spec results repaired."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from ipybox_core.errors import UnknownToolError
from ipybox_core.mcp import McpCompatibilityWarning, McpRegistry
from ipybox_core.mcp._lenient import repair_call_result, repair_tool_listing

pytest_plugins = ["servers.fixtures"]

VERSION = "2025-11-25"
GOOD_TOOLS = ["echo", "no_type", "bad_output", "bad_annotations", "video", "structured_only", "pid", "die"]


@pytest.mark.parametrize("page_size", [1, 3, 100])
async def test_malformed_tools_are_repaired_or_left_out_with_warnings(
    raw_server_config: dict[str, Any], page_size: int
) -> None:
    config = {**raw_server_config, "args": [*raw_server_config["args"], "--page-size", str(page_size)]}
    async with McpRegistry() as registry:
        with pytest.warns(McpCompatibilityWarning) as warned:
            tools = await registry.add("raw", config)
        assert [tool.name for tool in tools] == GOOD_TOOLS  # every page, minus the unusable tool
        messages = [str(warning.message) for warning in warned]
        assert any("'raw'" in m and "'array_input' left out" in m for m in messages)
        assert any("'no_type'" in m and "repaired" in m for m in messages)
        assert any("'bad_output'" in m and "outputSchema" in m for m in messages)
        assert any("'bad_annotations'" in m and "annotations" in m for m in messages)
        assert registry.tool("raw", "no_type").input_schema == {
            "type": "object",
            "properties": {"x": {"type": "string"}},
        }
        assert registry.tool("raw", "bad_output").output_schema is None
        assert registry.tool("raw", "bad_annotations").annotations.read_only_hint is None
        assert (await registry.call("raw", "echo", {"text": "works"})).text == "works"
        assert (await registry.call("raw", "no_type", {"x": "1"})).text == "called no_type"
        with pytest.raises(UnknownToolError):
            await registry.call("raw", "array_input", {})


async def test_off_spec_call_results_are_repaired(clean_raw_server_config: dict[str, Any]) -> None:
    async with McpRegistry() as registry:
        await registry.add("raw", clean_raw_server_config)
        with pytest.warns(McpCompatibilityWarning, match="unknown type 'video'"):
            video = await registry.call("raw", "video")
        assert video.content == [
            {"type": "text", "text": '{"type": "video", "url": "https://example.invalid/v.mp4"}'}
        ]
        structured_only = await registry.call("raw", "structured_only")
        assert structured_only.text == '{"answer": 42}'
        assert structured_only.structured == {"answer": 42}  # kept, though it declares no output schema


def test_repair_tool_listing_cases() -> None:
    listing: dict[str, Any] = {
        "tools": [
            {"name": "ok", "inputSchema": {"type": "object"}},
            {"name": "no_schema"},
            "not a tool",
            {"inputSchema": {"type": "object"}},
            {"name": "bad_icons", "inputSchema": {"type": "object"}, "icons": "nope"},
            {"name": "bad_name_type", "inputSchema": {"type": "object"}, "description": 42},
            {"name": "bad_schema_value", "inputSchema": "string"},
        ]
    }
    with pytest.warns(McpCompatibilityWarning) as warned:
        repair_tool_listing(listing, server="s", version=VERSION)
    assert [tool["name"] for tool in listing["tools"]] == [
        "ok",
        "no_schema",
        "bad_icons",
        "bad_name_type",
        "bad_schema_value",
    ]
    assert listing["tools"][1]["inputSchema"] == {"type": "object", "properties": {}}
    assert "icons" not in listing["tools"][2] and "description" not in listing["tools"][3]
    messages = " | ".join(str(warning.message) for warning in warned)
    assert "tool #2 of tools/list has no name" in messages and "tool #3" in messages
    assert "'no_schema': has no inputSchema" in messages


def test_repair_tool_listing_without_a_list() -> None:
    listing: dict[str, Any] = {"tools": None}
    with pytest.warns(McpCompatibilityWarning, match="no list of tools"):
        repair_tool_listing(listing, server="s", version=VERSION)
    assert listing == {"tools": []}


def test_modern_protocol_keeps_non_object_output_schemas() -> None:
    listing: dict[str, Any] = {
        "tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}}]
    }
    repair_tool_listing(listing, server="s", version="2026-07-28")
    assert listing["tools"][0]["outputSchema"] == {"type": "array"}


@pytest.mark.parametrize(
    ("result", "content", "warns"),
    [
        ({"content": [{"type": "text", "text": "ok"}]}, [{"type": "text", "text": "ok"}], False),
        ({"structuredContent": {"a": 1}}, [{"type": "text", "text": '{"a": 1}'}], False),
        ({}, [], False),
        ({"content": "plain"}, [{"type": "text", "text": '"plain"'}], True),
        ({"content": [{"type": "image"}]}, [{"type": "text", "text": '{"type": "image"}'}], True),
        ({"content": [3]}, [{"type": "text", "text": "3"}], True),
    ],
)
def test_repair_call_result_cases(result: dict[str, Any], content: list[dict[str, Any]], warns: bool) -> None:
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        repair_call_result(result, server="s", version=VERSION)
    assert result["content"] == content
    assert bool(warned) == warns
