"""The prompt reference: compact, deterministic, within its budget, and telling how to see more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from codegen_kit import load_tools, tool

from ipybox_core.codegen import GeneratedPackage, api_reference, generate_server_package


@pytest.fixture
def packages(tmp_path: Path) -> list[GeneratedPackage]:
    root = tmp_path / "mcptools"
    return [
        generate_server_package("everything", load_tools("server-everything.json"), root),
        generate_server_package("research", load_tools("research-tools.json"), root),
        generate_server_package("fetch", load_tools("mcp-server-fetch.json"), root),
    ]


def test_full_reference_has_imports_signatures_summaries_and_models(packages: list[GeneratedPackage]) -> None:
    text = api_reference(packages)
    assert "# from mcptools.research import ...\n" in text  # the names follow as signatures
    assert "create_order, date_range" not in text
    assert (
        "def create_order(*, customer: Customer, items: list[LineItem], priority: Literal['low', 'normal', "
        "'high'] = 'normal', tags: list[str] = [], note: str | None = None) -> OrderSummary:\n"
        '    """Create an order from a nested customer object and an array of line items."""'
    ) in text
    assert "class Customer: name: str; email: str | None = None; address: Address" in text
    assert "class OrderSummary: order_id: str; customer_name: str; city: str; item_count: int;" in text
    assert (
        "def date_range(*, from_: str, to: str, class_: Literal['day', 'week'] = 'day') -> dict[str, str]:"
        in text
    )
    assert "help(<function>)" in text
    # servers in module order, each import line before its tools
    assert (
        text.index("from mcptools.everything")
        < text.index("from mcptools.fetch")
        < text.index("def create_order")
    )


def test_reference_is_deterministic(packages: list[GeneratedPackage]) -> None:
    assert api_reference(packages) == api_reference(list(reversed(packages)))
    assert api_reference(packages, max_chars=900) == api_reference(list(reversed(packages)), max_chars=900)


def test_budget_drops_detail_tool_by_tool(packages: list[GeneratedPackage]) -> None:
    full = api_reference(packages)
    almost = api_reference(packages, max_chars=len(full) - 1)
    assert len(full) - 200 < len(almost) < len(full)  # one model line less, not every model
    assert "class Address" in almost and "class Stats" not in almost
    assert "help(<function>)" in almost and "help(<package>)" not in almost
    no_models = api_reference(packages, max_chars=len(full) - 700)
    assert "\nclass " not in no_models and "def create_order(" in no_models  # the first tools keep theirs
    assert "def whoami(" not in no_models and "whoami: Returns selected" in no_models  # a summary instead
    assert "from mcptools.research import create_order, date_range" not in no_models  # each tool has a line
    imports = api_reference(packages, max_chars=1070)  # the intro names .structured (issue 27)
    assert "from mcptools.research import create_order, date_range, die" in imports
    assert "create_order: Create an order" in imports and "text_to_upper:" not in imports
    for budget in (600, 400, 250, 10):
        text = api_reference(packages, max_chars=budget)
        assert len(text) <= budget, budget
    partial = api_reference(packages, max_chars=600)
    assert "more: help(mcptools." in partial


def test_long_descriptions_and_enums_stay_short(tmp_path: Path) -> None:
    info = tool(
        "pick",
        {"value": {"enum": [f"value-{i}" for i in range(500)]}},
        ["value"],
        description="x " * 2000 + '\nsecond line """ with quotes',
    )
    text = api_reference([generate_server_package("s", [info], tmp_path)])
    assert len(text) < 1200 and "second line" not in text
    assert "Literal['value-0', 'value-1'," in text and ", ... and 473 more]" in text  # a visible count


def test_prompt_is_much_smaller_than_function_calling_specs(packages: list[GeneratedPackage]) -> None:
    specs = [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
        }
        for name in ("server-everything.json", "research-tools.json", "mcp-server-fetch.json")
        for t in load_tools(name)
    ]
    ratio = len(api_reference(packages)) / len(json.dumps(specs))
    assert ratio < 0.5, ratio
