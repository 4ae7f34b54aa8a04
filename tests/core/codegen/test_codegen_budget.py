"""api_reference(max_chars=...): every budget is used, and a larger one never shows less."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from codegen_kit import load_tools

from ipybox_core.codegen import GeneratedPackage, api_reference, generate_server_package

_SECTION_HEAD = re.compile(r"^(# )?from mcptools\.(\w+) import (.*)$")


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> list[GeneratedPackage]:
    root = tmp_path_factory.mktemp("budget") / "mcptools"
    return [
        generate_server_package("everything", load_tools("server-everything.json"), root),
        generate_server_package("research", load_tools("research-tools.json"), root),
        generate_server_package("fetch", load_tools("mcp-server-fetch.json"), root),
    ]


def facts(text: str) -> set[str]:
    """What the text tells: each tool's name, summary and signature (per server), and each model."""
    found: set[str] = set()
    server = ""
    for line in text.splitlines():
        head = _SECTION_HEAD.match(line)
        if head:
            server = head[2]
            if head[3] != "...":
                found.update(f"name {server}.{name}" for name in head[3].split(", "))
        elif line.startswith("def "):
            name = line[4 : line.index("(")]
            found.update(f"{kind} {server}.{name}" for kind in ("name", "summary", "signature"))
        elif line.startswith("class "):
            found.add("model " + line[6 : line.index(":")])
        elif re.match(r"^\w+: ", line):
            name = line.split(":", 1)[0]
            found.update(f"{kind} {server}.{name}" for kind in ("name", "summary"))
    return found


def test_a_larger_budget_never_shows_less_and_each_budget_is_kept(packages: list[GeneratedPackage]) -> None:
    full = api_reference(packages)
    everything = facts(full)
    assert len(everything) > 60 and "signature research.create_order" in everything
    minimal = len(api_reference(packages, max_chars=800)) - 100  # below it, names are cut
    widest = max(len(line) for line in full.splitlines()) + 1
    before: set[str] = set()
    outputs = set()
    for budget in range(0, len(full) + 2):
        text = api_reference(packages, max_chars=budget)
        assert len(text) <= budget, budget
        now = facts(text)
        assert before <= now, (budget, before - now)
        before = now
        outputs.add(text)
        if minimal <= budget < len(full):
            # the next step (a line, or a signature replacing a summary) did not fit
            assert budget - len(text) < 2 * widest, budget
    assert before == everything and text == full
    assert len(outputs) > 50  # not a few fixed levels


def test_servers_take_turns(packages: list[GeneratedPackage]) -> None:
    full = api_reference(packages)
    half = api_reference(packages, max_chars=len(full) * 2 // 3)
    signed = {fact.split()[1].split(".")[0] for fact in facts(half) if fact.startswith("signature ")}
    assert signed == {"everything", "research", "fetch"}
    assert "signature research.whoami" not in facts(half)  # later tools keep a summary line
    assert "whoami: Returns selected HTTP request headers" in half


def test_shortened_reference_points_to_help_on_functions(packages: list[GeneratedPackage]) -> None:
    text = api_reference(packages, max_chars=2000)
    assert "help(<function>) shows a function in full" in text
    assert "help(<package>)" not in text
    assert "# Shortened" not in api_reference(packages)


def test_no_tools_and_tiny_budgets(tmp_path: Path, packages: list[GeneratedPackage]) -> None:
    assert api_reference([]) == api_reference([], max_chars=1000)
    assert api_reference(packages, max_chars=0) == ""
    tiny = api_reference(packages, max_chars=60)
    assert tiny.startswith("# MCP tools: help() on mcptools.everything") and len(tiny) == 60
