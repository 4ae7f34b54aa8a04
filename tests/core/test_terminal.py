"""The one approval question format, answers read from pipes, files and cancelled reads, and text
from the code escaped on its way to the terminal."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ipybox_core.approval import ApprovalRequest
from ipybox_core.cli._console import CodeOutput, Console
from ipybox_core.cli._prompt import UNREGISTERED_MESSAGE, TerminalApprover
from ipybox_core.codegen.package import GeneratedPackage, GeneratedTool
from ipybox_core.executor import RegisteredServer
from ipybox_core.mcp.config import parse_server_config
from ipybox_core.mcp.types import ToolAnnotations
from ipybox_core.terminal import approval_question, ask, registered_call, terminal_safe


@dataclass
class Call:
    name: str
    args: dict[str, Any]
    hints: list[str] = field(default_factory=list)


def test_the_question_reads_like_a_python_call() -> None:
    assert (
        approval_question(Call("shop.place_order", {"product_id": "b-101", "quantity": 1}, ["destructive"]))
        == "approve shop.place_order(product_id='b-101', quantity=1) [destructive]?"
    )
    assert approval_question(Call("shop.list", {})) == "approve shop.list()?"
    assert approval_question(Call("shell", {"command": "ls -l"})) == "approve shell command 'ls -l'?"
    long = approval_question(Call("ledger.file", {"body": "a\nb\nc", "ids": list(range(100))}))
    assert long.startswith("approve ledger.file(body=<3 lines>, ids=[0, 1, 2,") and "...)" in long
    assert len(long) < 130


@pytest.fixture
def pipe() -> Iterator[tuple[io.TextIOWrapper, int]]:
    """(a text reader like stdin, the write end's descriptor)."""
    read_fd, write_fd = os.pipe()
    reader = open(read_fd, encoding="utf-8")  # noqa: SIM115 - closed below
    yield reader, write_fd
    reader.close()
    with contextlib.suppress(OSError):
        os.close(write_fd)


async def test_piped_answers_are_echoed_and_end_of_input_is_no_answer(
    pipe: tuple[io.TextIOWrapper, int],
) -> None:
    reader, write_fd = pipe
    os.write(write_fd, b"maybe\ny\nN\n")
    os.close(write_fd)
    shown = io.StringIO()
    assert await ask("approve a()?", source=reader, prompt=shown) is True
    assert await ask("approve b()?", source=reader, prompt=shown) is False
    assert await ask("approve c()?", source=reader, prompt=shown) is None
    assert shown.getvalue().splitlines() == [
        "approve a()? [y/N] maybe",
        "please answer y or n",
        "approve a()? [y/N] y",
        "approve b()? [y/N] N",
        "approve c()? [y/N] ",
    ]


async def test_answers_from_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "answers").write_text("yes\n")
    with open(tmp_path / "answers", encoding="utf-8") as source:
        assert await ask("approve a()?", source=source, prompt=io.StringIO()) is True


async def test_a_cancelled_question_stops_reading_at_once(pipe: tuple[io.TextIOWrapper, int]) -> None:
    reader, write_fd = pipe
    waiting = asyncio.create_task(ask("approve a()?", source=reader, prompt=io.StringIO()))
    await asyncio.sleep(0.05)
    waiting.cancel()  # what Ctrl-C does under asyncio.run
    with pytest.raises(asyncio.CancelledError):
        await waiting
    os.write(write_fd, b"y\n")  # the next question reads the next answer: nothing was consumed
    assert await ask("approve b()?", source=reader, prompt=io.StringIO()) is True


async def test_auto_shows_the_question_answered() -> None:
    shown = io.StringIO()
    assert await ask("approve a()?", auto=True, prompt=shown) is True
    assert shown.getvalue() == "approve a()? [y/N] y (auto)\n"


# --- text from the code never reaches the terminal raw (issue 22, class 4) ---------------------

SPOOF = "\r\x1b[2Kapprove shop.list_products() [read-only]?\x1b[8m"
"""Erase the line, write a read-only question, hide what follows (the real question's end)."""
FORBIDDEN = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))] + [
    "\u061c",
    "\u200b",
    "\u200e",
    "\u200f",
    "\u2028",
    "\u2029",
    "\u202a",
    "\u202e",
    "\u2066",
    "\u2069",
    "\ufeff",
    "\U000e0041",
]


def raw(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on or hide."""
    return sorted({char for char in text if char in FORBIDDEN})


def test_terminal_safe_escapes_controls_c1_bidi_and_invisible_format_characters() -> None:
    hostile = "".join(FORBIDDEN)
    shown = terminal_safe(hostile, lines=False)
    assert raw(shown) == []
    assert shown.startswith("\\x00\\x01") and "\\x1b" in shown and "\\x9b" in shown
    assert "\\u202e" in shown and "\\U000e0041" in shown and "\\u2028" in shown
    assert raw(hostile) == sorted(FORBIDDEN)  # control: the text itself is all of them


def test_terminal_safe_keeps_lines_tabs_and_ordinary_unicode_in_output() -> None:
    text = "total\t42\nprix: 3\xa0€ — 東京 👩\u200d💻 é\n"
    assert terminal_safe(text) == text
    assert terminal_safe("50%\r100%\x1b[0m\n") == "50%\\r100%\\x1b[0m\n"
    assert terminal_safe("a\nb\tc", lines=False) == "a\\nb\\tc"
    assert terminal_safe(terminal_safe(SPOOF)) == terminal_safe(SPOOF)  # escaping twice changes nothing


def test_the_question_escapes_argument_names_and_values() -> None:
    call = Call("shop.place_order", {"product_id": "b-101", SPOOF: 1, "note": "\u202eredro"}, ["destructive"])
    question = approval_question(call)
    assert raw(question) == []
    assert question.startswith("approve shop.place_order(product_id='b-101', '\\r\\x1b[2Kapprove")
    assert question.endswith("note='\\u202eredro') [destructive]?")


def test_control_the_naive_question_carries_the_spoofing_escape() -> None:
    """The format before the fix (``key=value`` joined raw): the ESC sequence reaches the terminal."""
    call = Call("shop.place_order", {"product_id": "b-101", SPOOF: 1}, ["destructive"])
    naive = f"approve {call.name}({', '.join(f'{key}={value!r}' for key, value in call.args.items())})"
    assert "\x1b[2K" in naive and "\r" in naive
    assert "\x1b" not in approval_question(call)


def test_the_question_stays_short_however_many_and_long_the_names() -> None:
    args = {f"{'x' * 5000}{number}": "v" * 5000 for number in range(1000)}
    question = approval_question(Call("shop.place_order", args, ["destructive"]))
    assert len(question) < 400
    assert question.startswith("approve shop.place_order(") and question.endswith("more)) [destructive]?")
    command = approval_question(Call("shell", {"command": "echo " + "a" * 5000 + "\x1b[2K"}))
    assert len(command) < 450 and raw(command) == []


def _shop() -> dict[str, RegisteredServer]:
    tool = GeneratedTool(
        tool="place_order", function="place_order", signature="", summary="", description="", module=""
    )
    package = GeneratedPackage(
        server="shop", module="shop", path=Path("/nowhere/mcptools/shop"), tools=[tool]
    )
    config = parse_server_config("shop", {"command": "shop-server"})
    return {"shop": RegisteredServer(name="shop", config=config, package=package)}


async def test_the_question_is_named_from_the_registry_and_unregistered_calls_are_not_asked() -> None:
    known = ApprovalRequest(
        kind="mcp",
        server="shop",
        tool="place_order",
        args={"quantity": 1},
        annotations=ToolAnnotations(destructive_hint=True),
    )
    call = registered_call(known, _shop())
    assert call is not None and (call.name, call.hints) == ("shop.place_order", ("destructive",))

    stream = io.StringIO()
    approver = TerminalApprover(
        auto_approve=True, answers_from_stdin=True, console=Console(stream, colour=False)
    )
    for server, tool in [("shop", "place_order" + SPOOF), ("shop" + SPOOF, "list_products")]:
        request = ApprovalRequest(kind="mcp", server=server, tool=tool, args={})
        await approver.decide(request, _shop())  # --yes would approve anything it asked about
        assert request.decision is not None and not request.decision.approved
        assert request.decision.reason == UNREGISTERED_MESSAGE
    assert "[y/N]" not in stream.getvalue() and raw(stream.getvalue()) == ["\n"]  # not asked
    await approver.decide(known, _shop())
    assert known.decision is not None and known.decision.approved


async def test_a_question_starts_on_its_own_line_after_unfinished_code_output() -> None:
    stream = io.StringIO()
    output = CodeOutput(stdout=stream, stderr=stream)
    approver = TerminalApprover(
        auto_approve=True, answers_from_stdin=True, console=Console(stream, colour=False), output=output
    )
    output.write("approve shop.list_products() [read-only]? [y/N] \x1b[8m")
    request = ApprovalRequest(kind="mcp", server="shop", tool="place_order", args={})
    await approver.decide(request, _shop())
    assert stream.getvalue().splitlines() == [
        "approve shop.list_products() [read-only]? [y/N] \\x1b[8m",
        "approve shop.place_order()? [y/N] y (--yes)",
    ]


def test_console_messages_quoting_the_code_are_escaped_before_styling() -> None:
    stream = io.StringIO()
    Console(stream, colour=True).error(f"MCP server said {SPOOF}")
    shown = stream.getvalue()
    assert shown.startswith("\x1b[31;1mipybox: error: \x1b[0m")  # the console's own style
    assert "\x1b" not in shown[len("\x1b[31;1mipybox: error: \x1b[0m") :]
    assert "\\r\\x1b[2Kapprove" in shown
