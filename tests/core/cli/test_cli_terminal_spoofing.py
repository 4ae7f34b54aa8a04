"""Code cannot spoof an approval question on the real terminal of ``ipybox run``.

The attack of issue 22 (class 4): the code prints, or names an argument, with ANSI escapes that
erase the real question and show a read-only ``list_products`` one instead; the person answers
``y`` and ``place_order`` runs. Each attack runs ``ipybox run`` on a pseudo-terminal, renders what
reached it in a terminal emulator (pyte) and checks what a person would see. The control runs the
same attack with the escaping switched off (``terminal_safe`` and the argument-name rendering
replaced by the identity): there the person sees only the fake question, answers ``y``, and the
order is placed.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pyte
import pytest

pytestmark = pytest.mark.slow

FAKE_QUESTION = "approve shop.list_products(category='books') [read-only]? [y/N] "
HIDE = "\x1b[30;40m"
"""Black on black: what follows cannot be seen (as ``\\x1b[8m``, concealed, on most terminals)."""
REAL_QUESTION_END = b"[destructive]? [y/N] "
RAW_FORBIDDEN = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))] + [
    "\u061c",
    "\u200e",
    "\u200f",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
]
"""What must never reach the terminal from the code: C0 (but tab and newline), DEL, C1, bidi."""

PLACE_ORDER = """\
from ipybox_core.inkernel import runtime
try:
    response = runtime.call_tool("shop", "place_order", ARGUMENTS)
    print("\\nORDERED", response.structured)
except PermissionError as error:
    print("\\nREJECTED", error)
"""
OUTPUT_ATTACK = (
    "import sys\n"
    f"sys.stdout.write({FAKE_QUESTION + HIDE!r} + '\\x9b30;40m\\u202e')\n"
    "sys.stdout.flush()\n"
    "ARGUMENTS = {'product_id': 'b-101', 'quantity': 1}\n" + PLACE_ORDER
)
"""The code's output ends with the fake question and hides everything after it: the real one."""
SPOOFING_NAME = "\r\x1b[2K" + FAKE_QUESTION + HIDE + "\u202e"
NAME_ATTACK = f"ARGUMENTS = {{'product_id': 'b-101', 'quantity': 1, {SPOOFING_NAME!r}: 1}}\n" + PLACE_ORDER
"""An argument name that erases the question's line, writes the fake one and hides the rest."""

WEAKENED = """\
import ipybox_core.terminal as terminal
terminal.terminal_safe = lambda text, **_: text
terminal._argument_name = lambda key: key
from ipybox_core.cli import main
raise SystemExit(main())
"""
"""``ipybox`` with the escaping switched off (the code path before the fix)."""


@dataclass
class Seen:
    raw: bytes
    """Every byte that reached the terminal up to the question."""
    screen: list[str]
    """The terminal's visible lines (text drawn in the background colour is blank)."""
    cursor_line: str
    """The visible line the cursor is on: where the person types the answer."""
    output: str
    """Everything the terminal got, the code's output after the answer included."""


def run_on_a_terminal(tmp_path: Path, code: str, answer: str, *, weakened: bool) -> Seen:
    """``ipybox run`` of ``code`` with the demo shop, on a pty (TERM=dumb: no colours of ipybox's)."""
    (tmp_path / "attack.py").write_text(code)
    shop = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"shop": shop}}))
    launch = ["-c", WEAKENED] if weakened else ["-m", "ipybox_core.cli"]
    child = pexpect.spawn(
        sys.executable,
        [*launch, "run", "attack.py", "--config", "mcp.json", "--quiet"],
        cwd=str(tmp_path),
        env={"PYTHONUNBUFFERED": "1", "TERM": "dumb", "PATH": "/usr/bin:/bin"},
        timeout=120,
        dimensions=(40, 200),
    )
    child.expect_exact(REAL_QUESTION_END)
    raw = bytes(child.before or b"") + REAL_QUESTION_END
    screen = pyte.Screen(200, 40)
    pyte.ByteStream(screen).feed(raw)
    child.sendline(answer)
    child.expect(pexpect.EOF, timeout=60)
    child.close()
    output = (raw + bytes(child.before or b"")).decode("utf-8", "replace")
    assert child.exitstatus == 0, output
    visible = [_visible(screen, row) for row in range(screen.lines)]
    return Seen(raw, visible, visible[screen.cursor.y], output)


def _visible(screen: pyte.Screen, row: int) -> str:
    line = screen.buffer[row]
    return "".join(
        " " if line[x].fg == line[x].bg != "default" else line[x].data for x in range(screen.columns)
    ).rstrip()


@pytest.mark.parametrize("code", [OUTPUT_ATTACK, NAME_ATTACK], ids=["output", "argument-name"])
def test_the_person_sees_the_real_question_from_the_hosts_registry(tmp_path: Path, code: str) -> None:
    seen = run_on_a_terminal(tmp_path, code, "n", weakened=False)
    text = seen.raw.decode("utf-8").replace("\r\n", "\n")  # the pty's own newline translation
    assert [char for char in RAW_FORBIDDEN if char in text] == []
    assert "\\x1b[" in text  # the code's escape, shown for what it is
    assert seen.cursor_line.startswith("approve shop.place_order(product_id='b-101', quantity=1")
    assert seen.cursor_line.endswith("[destructive]? [y/N]")
    assert seen.screen[seen.screen.index(seen.cursor_line) - 1] == "---- ipybox asks ----"
    assert "REJECTED shop.place_order was rejected: the user said no" in seen.output


@pytest.mark.parametrize("code", [OUTPUT_ATTACK, NAME_ATTACK], ids=["output", "argument-name"])
def test_control_without_escaping_the_person_sees_list_products_and_orders(tmp_path: Path, code: str) -> None:
    seen = run_on_a_terminal(tmp_path, code, "y", weakened=True)
    assert "\x1b[30;40m" in seen.raw.decode("utf-8")  # the raw escape reached the terminal
    shown = "\n".join(seen.screen)
    assert FAKE_QUESTION.rstrip() in shown
    assert "place_order" not in shown and "destructive" not in shown
    assert "ORDERED" in seen.output  # "y" to what looked like list_products placed the order
