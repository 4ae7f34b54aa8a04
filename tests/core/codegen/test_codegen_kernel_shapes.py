"""Issue 27's codegen items from code in a real kernel, against a real stdio MCP server
(``shapes_server.py``): bytes are not text, each ``anyOf`` alternative keeps its bounds, and the
reference names the app-only tools it left out."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from kernel_kit import echo, executor_fixture, outcomes

from ipybox_core import CodeExecutor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "executor"))
from executor_kit import run

from servers import PYTHON

pytestmark = pytest.mark.asyncio(loop_scope="module")

SHAPES_STDIO: dict[str, Any] = {
    "command": PYTHON,
    "args": [str(Path(__file__).parent / "shapes_server.py")],
    "env": {"PYTHONUNBUFFERED": "1"},
}
executor = executor_fixture("shapes", SHAPES_STDIO)


async def _echo(executor: CodeExecutor, call: str) -> dict[str, Any]:
    return await echo(executor, "import base64\nfrom mcptools.shapes import label", call)


async def _refused(executor: CodeExecutor, cases: list[str]) -> list[str]:
    return await outcomes(executor, "shapes", "label", cases)


async def test_bytes_are_not_taken_for_a_string(executor: CodeExecutor) -> None:
    before = (await _echo(executor, "label()"))["call"]
    refused = await _refused(
        executor, ["{'text': b'hello'}", "{'text': bytearray(b'hi')}", "{'image': b'\\x89PNG raw'}"]
    )
    assert len(refused) == 3 and all(line.startswith("REFUSED") for line in refused), refused
    assert "expected a string, not bytes: pass value.decode() for text" in refused[0]
    assert "not bytearray" in refused[1]
    assert "these bytes are not base64: pass base64.b64encode(data)" in refused[2]
    assert (await _echo(executor, "label()"))["call"] == before + 1  # none of them reached the server
    echoed = await _echo(executor, "label(text='hello', image=base64.b64encode(b'\\x89PNG'))")
    assert echoed["text"] == ["hello", "string"]
    assert echoed["image"] == ["iVBORw==", "string"]  # b64encode's bytes are sent as their text


async def test_each_anyof_alternative_keeps_its_bounds(executor: CodeExecutor) -> None:
    refused = await _refused(executor, ["{'value': 'abcdef'}", "{'value': -1}", "{'value': 2.5}"])
    assert len(refused) == 3 and all(line.startswith("REFUSED") for line in refused), refused
    assert "at most 5 characters" in refused[0]
    assert (await _echo(executor, "label(value='abcde')"))["value"] == ["abcde", "string"]
    assert (await _echo(executor, "label(value=0)"))["value"] == [0, "integer"]
    page = await run(executor, "from mcptools.shapes import label\nhelp(label)\n")
    assert "value: (str: max length 5; int: >= 0)" in page.text


async def test_the_reference_names_the_app_only_tools(executor: CodeExecutor) -> None:
    reference = executor.api_reference()
    assert "# Left out (for an MCP App's UI only, no function): draw_chart, refresh_panel\n" in reference
    assert "def label(" in reference and "def draw_chart" not in reference
