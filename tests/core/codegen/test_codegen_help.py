"""What the agent reads in the kernel: help() pages of a package, a function and a model, and results."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from codegen_kit import DATA, Generator, Outcome, ThreadedToolServer, generate_fixture, served_fixture, tool

from ipybox_core.codegen import generate_server_package
from ipybox_core.mcp.types import ToolInfo

served = served_fixture()
generate = generate_fixture()

_LINE = {
    "type": "object",
    "properties": {"label": {"type": "string"}, "value": {"type": "number"}},
    "required": ["label", "value"],
}
_SALE = {
    "type": "object",
    "title": "Sale",
    "properties": {
        "day": {"type": "integer", "description": "Day of the year"},
        "product_id": {"type": "string"},
        "quantity": {"type": "integer", "minimum": 1},
        "channel": {"type": "string", "enum": ["web", "shop"]},
    },
    "required": ["day", "product_id", "quantity", "channel"],
}
LEDGER = [
    ToolInfo(
        name="file_report",
        description="File a short report (a title and labelled numbers) in the ledger.\n\nLonger text.",
        input_schema={
            "type": "object",
            "properties": {
                "title": {"type": "string", "description": "The report's title"},
                "lines": {"type": "array", "items": {**_LINE, "title": "ReportLine"}},
            },
            "required": ["title", "lines"],
        },
        output_schema={
            "type": "object",
            "title": "Receipt",
            "properties": {
                "report_id": {"type": "string"},
                "lines": {"type": "integer"},
                "signed": {"type": "boolean"},
            },
            "required": ["report_id", "lines", "signed"],
        },
    ),
    ToolInfo(
        name="sales",
        description="Every sale of the shop between two days of the year (about 80 records a day).",
        input_schema={
            "type": "object",
            "properties": {
                "first_day": {"type": "integer", "default": 1, "minimum": 1},
                "last_day": {"type": "integer", "default": 30, "maximum": 366},
            },
        },
        output_schema={
            "type": "object",
            "title": "SalesList",
            "properties": {"sales": {"type": "array", "items": _SALE}},
            "required": ["sales"],
        },
    ),
]
"""Shaped like the demo's ledger server: 2 tools, 4 models (help(package) was 62 KB)."""


def help_pages(tmp_path: Path, server: str, tools: list[ToolInfo], names: list[str]) -> dict[str, str]:
    """``pydoc`` pages (as ``help()`` prints them) from a fresh interpreter: the package, then ``names``."""
    generate_server_package(server, tools, tmp_path / "mcptools")
    code = f"""
        import importlib, json, pydoc
        package = importlib.import_module("mcptools.{server}")
        pages = {{"package": pydoc.render_doc(package, renderer=pydoc.plaintext)}}
        import mcptools
        pages["root"] = pydoc.render_doc(mcptools, renderer=pydoc.plaintext)
        for name in {names!r}:
            pages[name] = pydoc.render_doc(getattr(package, name), renderer=pydoc.plaintext)
        print(json.dumps(pages))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    pages: dict[str, str] = json.loads(done.stdout)
    return pages


def test_help_on_a_two_tool_server_is_compact(tmp_path: Path) -> None:
    pages = help_pages(tmp_path, "ledger", LEDGER, ["file_report", "sales", "Receipt", "SalesList", "Sale"])
    package = pages["package"]
    assert len(package) < 2500, package  # was 62 KB: every model's inherited pydantic methods
    assert "def " not in package and "model_dump_json" not in package and "BaseModel" not in package
    assert (
        "file_report(*, title: str, lines: list[ReportLine]) -> Receipt\n"
        "            File a short report (a title and labelled numbers) in the ledger.\n"
    ) in package
    assert "class Sale: day: int; product_id: str; quantity: int; channel: Literal['web', 'shop']" in package
    assert "Longer text." not in package  # the full description is on the function's own page
    assert "Longer text." in pages["file_report"]
    assert len(pages["root"]) < 400
    for name in ("file_report", "sales"):
        assert 300 <= len(pages[name]) <= 800, pages[name]
    for name in ("Receipt", "SalesList", "Sale"):
        assert len(pages[name]) < 1000, pages[name]
        assert "model_validate" not in pages[name] and "Methods inherited from pydantic" not in pages[name]
    sale = pages["Sale"]
    assert "    day (int): Day of the year\n" in sale.replace(" |  ", "")
    assert "quantity (int): (>= 1)" in sale
    assert "channel (Literal['web', 'shop'])" in sale
    assert 'model["field"]' in sale and "print(model)" in sale


def test_help_on_a_larger_real_server_stays_small(tmp_path: Path) -> None:
    tools = [
        ToolInfo(
            name=t["name"],
            description=t.get("description", ""),
            input_schema=t["inputSchema"],
            output_schema=t.get("outputSchema"),
        )
        for t in json.loads((DATA / "server-everything.json").read_text())
    ]
    pages = help_pages(tmp_path, "everything", tools, ["GetStructuredContentResult"])
    assert len(tools) == 13 and len(pages["package"]) < 10_000  # one page per tool, no model internals
    assert len(pages["GetStructuredContentResult"]) < 1000


def test_help_on_a_package_shows_each_function_once(tmp_path: Path) -> None:
    tools = [
        ToolInfo(name=t["name"], description=t.get("description", ""), input_schema=t["inputSchema"])
        for t in json.loads((DATA / "server-everything.json").read_text())
    ]
    pages = help_pages(tmp_path, "everything", tools, [])
    package = pages["package"]
    assert "FUNCTIONS" not in package and "__getattr__" not in package  # was: every function again
    for info in tools:
        function = info.name.replace("-", "_")
        assert package.count(f"{function}(") == 1, function
    assert "SERVER = 'everything'" in package


def test_star_import_gives_the_functions_and_models_import_by_name(generate: Generator) -> None:
    imported = generate("ledger", LEDGER)
    assert imported.module.__all__ == ["file_report", "sales"]
    assert "Receipt" in dir(imported.module) and imported.module.Receipt.__name__ == "Receipt"


@pytest.fixture
def receipt(generate: Generator, served: ThreadedToolServer) -> Any:
    imported = generate("ledger", LEDGER)
    served.backend.reply = Outcome(structured={"report_id": "r-1", "lines": 2, "signed": True, "note": "é"})
    return imported.module.file_report(title="t", lines=[{"label": "a", "value": 1}])


def test_a_result_prints_as_indented_json(receipt: Any) -> None:
    assert str(receipt) == json.dumps(
        {"report_id": "r-1", "lines": 2, "signed": True, "note": "é"}, indent=2, ensure_ascii=False
    )
    assert repr(receipt).startswith("Receipt(report_id='r-1'")  # repr stays Python


def test_a_result_reads_like_a_dict(receipt: Any) -> None:
    assert receipt["report_id"] == receipt.report_id == "r-1"
    assert receipt["note"] == "é"  # a key the schema does not name
    assert "signed" in receipt and "note" in receipt and "missing" not in receipt and 3 not in receipt
    with pytest.raises(KeyError):
        receipt["missing"]
    assert (
        dict(receipt) == receipt.model_dump() == {"report_id": "r-1", "lines": 2, "signed": True, "note": "é"}
    )
    assert json.loads(receipt.model_dump_json())["lines"] == 2


def test_getitem_takes_the_wire_name_too(generate: Generator, served: ThreadedToolServer) -> None:
    schema = {"type": "object", "properties": {"_id": {"type": "string"}, "class": {"type": "integer"}}}
    imported = generate("s", [tool("get", output_schema=schema)])
    served.backend.reply = Outcome(structured={"_id": "x", "class": 3})
    result = imported.module.get()
    assert result.id_ == result["id_"] == result["_id"] == "x"
    assert result["class"] == result["class_"] == 3
    assert json.loads(str(result)) == {"id_": "x", "class_": 3}
