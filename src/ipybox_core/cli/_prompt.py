"""Asking the person at the terminal to approve MCP calls."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TYPE_CHECKING, TextIO

from ipybox_core.cli._console import Console

if TYPE_CHECKING:
    from ipybox_core.approval import ApprovalRequest

NO_TERMINAL_MESSAGE = (
    "the MCP call needs approval but there is no terminal to ask (the code came from stdin); "
    "run `ipybox run` with --yes to approve MCP calls automatically"
)
NO_ANSWER_MESSAGE = "no answer to the approval question (stdin is closed); use --yes to approve automatically"


class TerminalApprover:
    """Shows each approval request on stderr and reads ``y``/``n`` from the terminal.

    With ``answers_from_stdin`` (the code came from a file) answers are read from stdin, which may
    be a terminal or a pipe; otherwise (code read from stdin) from ``/dev/tty``. When no answer can
    be read the call is rejected with a message saying how to auto-approve.
    """

    def __init__(self, *, auto_approve: bool, answers_from_stdin: bool, console: Console) -> None:
        self.auto_approve = auto_approve
        self.answers_from_stdin = answers_from_stdin
        self.console = console

    async def decide(self, request: ApprovalRequest) -> None:
        question = self._question(request)
        if self.auto_approve:
            self.console.info(f"{question} {self.console.style('yes (--yes)', 'green')}")
            await request.accept()
            return
        answer = await asyncio.to_thread(self._ask, question)
        if answer is None:
            message = NO_ANSWER_MESSAGE if self.answers_from_stdin else NO_TERMINAL_MESSAGE
            self.console.warn(message)
            await request.reject(message)
        elif answer:
            await request.accept()
        else:
            await request.reject("the user said no")

    def _question(self, request: ApprovalRequest) -> str:
        if request.kind == "shell":
            call = f"run shell command {request.args.get('command', '')!r}"
        else:
            arguments = ", ".join(
                f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in request.args.items()
            )
            call = f"{request.name}({arguments})"
        hint = f" [{', '.join(request.hints)}]" if request.hints else ""
        return f"{self.console.style('approve', 'bold', 'cyan')} {call}{hint}?"

    def _ask(self, question: str) -> bool | None:
        """``True``/``False`` for an answer, ``None`` when none can be read."""
        if self.answers_from_stdin:
            return _read_answer(question, sys.stdin, self.console.stream)
        try:
            with open("/dev/tty", "r+", encoding="utf-8") as tty:
                return _read_answer(question, tty, tty)
        except OSError:
            return None


def _read_answer(question: str, source: TextIO, prompt_stream: TextIO) -> bool | None:
    while True:
        prompt_stream.write(f"{question} [y/N] ")
        prompt_stream.flush()
        line = source.readline()
        if not line:
            prompt_stream.write("\n")
            return None
        answer = line.strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("", "n", "no"):
            return False
        prompt_stream.write("please answer y or n\n")
