"""Tools a server lists that get no function (app-only tools) are named, so an agent does not look for them."""

from __future__ import annotations

import pydoc
from pathlib import Path

import pytest
from codegen_kit import Generator, generate_fixture, load_tools, tool

from ipybox_core.codegen import api_reference, generate_server_package

generate = generate_fixture()

_SHOP = [
    tool("search", {"q": {"type": "string"}}, description="Find products."),
    tool("render_view", app_only=True),
    tool("show\nchart", app_only=True),  # a hostile name stays on its line
]


def test_the_reference_names_the_left_out_tools_on_one_line(tmp_path: Path) -> None:
    package = generate_server_package("shop", _SHOP, tmp_path / "mcptools")
    assert package.left_out == {
        "render_view": "for an MCP App's UI only",
        "show\nchart": "for an MCP App's UI only",
    }
    assert [t.tool for t in package.tools] == ["search"]
    text = api_reference([package])
    assert "# Left out (for an MCP App's UI only, no function): render_view, show chart\n" in text
    assert "def render_view" not in text and "import render_view" not in text
    kept = generate_server_package("kept", _SHOP, tmp_path / "mcptools", include_app_only=True)
    assert kept.left_out == {} and "Left out" not in api_reference([kept])


def test_the_left_out_line_stays_within_every_budget(tmp_path: Path) -> None:
    root = tmp_path / "mcptools"
    packages = [
        generate_server_package("shop", _SHOP, root),
        generate_server_package("fetch", load_tools("mcp-server-fetch.json"), root),
    ]
    full = api_reference(packages)
    line = "# Left out (for an MCP App's UI only, no function): render_view, show chart\n"
    assert full.count("# Left out") == 1 and line in full
    minimal = None
    for budget in range(200, len(full) + 1):
        text = api_reference(packages, max_chars=budget)
        assert len(text) <= budget
        if line in text and minimal is None:
            minimal = budget
        if minimal is not None:
            assert line in text, budget  # once it fits, a larger budget keeps it
    assert minimal is not None  # it comes before the detail: with the names, not after the signatures
    assert "# Shortened to fit" in api_reference(packages, max_chars=minimal)


def test_many_left_out_tools_take_one_short_line(tmp_path: Path) -> None:
    tools = [tool(f"widget_panel_{n:03}", app_only=True) for n in range(200)] + [tool("search")]
    text = api_reference([generate_server_package("ui", tools, tmp_path / "mcptools")])
    line = next(line for line in text.splitlines() if line.startswith("# Left out"))
    assert len(line) < 400 and line.endswith("more") and "widget_panel_000" in line


def test_help_and_the_attribute_error_say_why_a_tool_is_missing(generate: Generator) -> None:
    imported = generate("shop", _SHOP)
    page = pydoc.render_doc(imported.module, renderer=pydoc.plaintext)
    assert "Left out (the server lists them; they have no function here):" in page
    assert "render_view: for an MCP App's UI only" in page
    with pytest.raises(AttributeError, match="'render_view' is left out: for an MCP App's UI only"):
        imported.module.render_view  # noqa: B018
