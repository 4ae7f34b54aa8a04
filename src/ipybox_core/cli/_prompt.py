"""Asking the person at the terminal to approve MCP calls."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ipybox_core.cli._console import Console
from ipybox_core.terminal import approval_question, ask

if TYPE_CHECKING:
    from ipybox_core.approval import ApprovalRequest

NO_TERMINAL_MESSAGE = (
    "the MCP call needs approval but there is no terminal to ask (the code came from stdin); "
    "run `ipybox run` with --yes to approve MCP calls automatically"
)
NO_ANSWER_MESSAGE = (
    "no answer to the approval question (end of input): the call is rejected; "
    "use --yes to approve MCP calls automatically"
)


class TerminalApprover:
    """Shows each approval request on stderr and reads ``y``/``n`` from the terminal.

    With ``answers_from_stdin`` (the code came from a file) answers are read from stdin, which may
    be a terminal or a pipe; otherwise (code read from stdin) from ``/dev/tty``. When no answer can
    be read the call is rejected with a message saying how to auto-approve, and so is every later
    call.
    """

    def __init__(self, *, auto_approve: bool, answers_from_stdin: bool, console: Console) -> None:
        self.auto_approve = auto_approve
        self.answers_from_stdin = answers_from_stdin
        self.console = console
        self._no_answers: str | None = None

    async def decide(self, request: ApprovalRequest) -> None:
        question = approval_question(request)
        if self.console.colour:
            question = question.replace("approve", self.console.style("approve", "bold", "cyan"), 1)
        if self._no_answers is None:
            answer = await self._ask(question)
        else:
            self.console.info(f"{question} [y/N] (no answer: rejected)")
            answer = None
        if answer is None:
            message = self._no_answers or (
                NO_ANSWER_MESSAGE if self.answers_from_stdin else NO_TERMINAL_MESSAGE
            )
            if self._no_answers is None:
                self.console.warn(message)
            self._no_answers = message
            await request.reject(message)
        elif answer:
            await request.accept()
        else:
            await request.reject("the user said no")

    async def _ask(self, question: str) -> bool | None:
        """``True``/``False`` for an answer, ``None`` when none can be read."""
        if self.auto_approve:
            return await ask(question, auto=True, prompt=self.console.stream, auto_label="y (--yes)")
        if self.answers_from_stdin:
            return await ask(question, source=sys.stdin, prompt=self.console.stream)
        try:
            tty = open("/dev/tty", "r+", encoding="utf-8")  # noqa: SIM115, ASYNC230 - closed below; never blocks
        except OSError:
            return None
        with tty:
            return await ask(question, source=tty, prompt=tty)
