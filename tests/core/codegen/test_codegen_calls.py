"""Generated code calling a real MCP server through the real tool server: results, errors, images.

The MCP server is the suite's shared test server (``servers.tools``), connected in-process.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from codegen_kit import (
    Generator,
    Imported,
    Outcome,
    ThreadedToolServer,
    generate_fixture,
    mcp_forwarding,
    served_fixture,
    tool,
)
from pydantic import BaseModel, ValidationError

from ipybox_core import runtime
from ipybox_core.mcp.types import ToolInfo
from servers.tools import build_server

served = served_fixture()
generate = generate_fixture()


async def _list_tools(server: Any) -> list[ToolInfo]:
    from mcp import Client

    async with Client(server) as client:
        listed = (await client.list_tools()).tools
    return [
        ToolInfo(
            name=t.name,
            description=t.description or "",
            input_schema=t.input_schema,
            output_schema=t.output_schema,
        )
        for t in listed
    ]


@pytest.fixture(scope="module")
def research(served: ThreadedToolServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Imported]:
    mcp_server = build_server()
    tools = asyncio.run(_list_tools(mcp_server))
    generator = Generator(tmp_path_factory.mktemp("gen"))
    with mcp_forwarding(served, "research", mcp_server):
        yield generator("research", tools)
    generator.close()


def test_structured_result_is_a_model(research: Imported, served: ThreadedToolServer) -> None:
    order = research.create_order(
        customer={"name": "Ada", "address": {"street": "Rue 1", "city": "Paris"}},
        items=[{"sku": "a", "qty": 2, "unit_price": 1.25}, research.LineItem(sku="b")],
    )
    assert isinstance(order, research.OrderSummary) and isinstance(order, BaseModel)
    assert (order.order_id, order.city, order.item_count, order.total) == ("ord-2-ada", "Paris", 3, 2.5)
    assert order.priority == "normal" and order.tags == []
    assert served.backend.calls[-1][2] == {
        "customer": {"name": "Ada", "address": {"street": "Rue 1", "city": "Paris"}},
        "items": [{"sku": "a", "qty": 2, "unit_price": 1.25}, {"sku": "b"}],
    }
    assert str(inspect.signature(research.create_order)).endswith("-> OrderSummary")


def test_wrapped_primitive_result_is_unwrapped(research: Imported) -> None:
    assert research.text_to_upper(text="ab", repeat=2) == "ABAB"
    assert str(inspect.signature(research.text_to_upper)) == "(*, text: str, repeat: int = 1) -> str"


def test_keyword_named_parameters_reach_the_server_by_wire_name(research: Imported) -> None:
    assert research.date_range(from_="2024-01-01", to="2024-02-01", class_="week") == {
        "from": "2024-01-01",
        "to": "2024-02-01",
        "class": "week",
    }


def test_text_results_and_images(research: Imported) -> None:
    echoed = research.echo(message="hello")
    assert echoed == "hello" and isinstance(echoed, runtime.ToolResult) and echoed.structured is None
    picture = research.image(width=2, height=2, colour="blue")
    assert isinstance(picture, runtime.ToolResult) and picture == "blue 2x2"
    assert len(picture.images) == 1 and picture.images[0].startswith(b"\x89PNG")
    assert "image/png" in picture._repr_mimebundle_()
    with pytest.raises(ValidationError):
        research.image(colour="purple")


def test_tool_errors_raise_tool_error_in_the_calling_code(research: Imported) -> None:
    with pytest.raises(runtime.ToolError, match="the widget is broken") as error:
        research.fail(kind="tool_error")
    assert (error.value.server, error.value.tool) == ("research", "fail")
    assert research.add(a=2, b=3) == 5  # the connection is still fine


def test_argument_errors_never_reach_the_server(research: Imported, served: ThreadedToolServer) -> None:
    before = len(served.backend.calls)
    with pytest.raises(ValidationError, match="items"):
        research.create_order(customer={"name": "Ada", "address": {"street": "s", "city": "c"}}, items="none")
    with pytest.raises(ValidationError):
        research.create_order(
            customer={"name": "Ada", "address": {"street": "s", "city": "c"}}, items=[{"sku": "a", "qty": 0}]
        )
    assert len(served.backend.calls) == before


RESULT_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
    "required": ["n"],
    "$defs": {"Item": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
}


def test_result_that_breaks_its_schema_is_returned_with_a_warning(
    generate: Generator, served: ThreadedToolServer
) -> None:
    imported = generate("res", [tool("get", output_schema=RESULT_SCHEMA)])
    served.backend.reply = Outcome(structured={"n": 1, "items": [{"name": "a"}], "extra": True})
    good = imported.get()
    assert good.n == 1 and good.items[0].name == "a" and good.extra is True  # unknown keys kept
    served.backend.reply = Outcome(structured={"n": "not a number", "items": [{"name": "a"}]})
    with pytest.warns(UserWarning, match=r"does not match its output schema \(n: "):
        bad = imported.get()
    assert bad.n == "not a number" and bad.items == [{"name": "a"}]  # nothing lost


def test_result_without_structured_content_falls_back_to_json_text_then_text(
    generate: Generator, served: ThreadedToolServer
) -> None:
    imported = generate("res", [tool("get", output_schema=RESULT_SCHEMA)])
    served.backend.reply = Outcome(content=[{"type": "text", "text": '{"n": 7}'}])
    assert imported.get().n == 7
    served.backend.reply = Outcome(content=[{"type": "text", "text": "plain words"}])
    with pytest.warns(UserWarning, match="no structured content"):
        assert imported.get() == "plain words"


def test_non_model_results_are_validated_types(generate: Generator, served: ThreadedToolServer) -> None:
    wrapped_list = {
        "type": "object",
        "properties": {"result": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
        "required": ["result"],
        "$defs": RESULT_SCHEMA["$defs"],
    }
    imported = generate(
        "res",
        [
            tool("items", output_schema=wrapped_list),
            tool("mapping", output_schema={"type": "object", "additionalProperties": {"type": "integer"}}),
            tool("anything", output_schema={}),
        ],
    )
    served.backend.reply = Outcome(structured={"result": [{"name": "x"}]})
    items = imported.items()
    assert [item.name for item in items] == ["x"] and isinstance(items[0], imported.Item)
    served.backend.reply = Outcome(structured={"a": 1})
    assert imported.mapping() == {"a": 1}
    served.backend.reply = Outcome(structured={"free": ["form"]})
    assert imported.anything() == {"free": ["form"]}
    assert str(inspect.signature(imported.items)).endswith("-> list[Item]")
    assert str(inspect.signature(imported.mapping)).endswith("-> dict[str, int]")
