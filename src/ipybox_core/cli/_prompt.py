"""Asking the person at the terminal to approve MCP calls."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, TextIO

from ipybox_core.cli._console import CodeOutput, Console
from ipybox_core.terminal import approval_question, ask, registered_call

if TYPE_CHECKING:
    from ipybox_core.approval import ApprovalRequest
    from ipybox_core.executor import RegisteredServer

NO_TERMINAL_MESSAGE = (
    "the MCP call needs approval but there is no terminal to ask (the code came from stdin); "
    "run `ipybox run` with --yes to approve MCP calls automatically"
)
NO_ANSWER_MESSAGE = (
    "no answer to the approval question (end of input): the call is rejected; "
    "use --yes to approve MCP calls automatically"
)
UNREGISTERED_MESSAGE = "the call names no MCP server and tool that ipybox registered: it is rejected"
SEPARATOR = "---- ipybox asks ----"
"""The line above each question that waits for an answer: code output is escaped and cannot
recolour, erase or continue it; the question itself is always the last line, at the cursor."""


class TerminalApprover:
    """Shows each approval request on stderr and reads ``y``/``n`` from the terminal.

    With ``answers_from_stdin`` (the code came from a file) answers are read from stdin, which may
    be a terminal or a pipe; otherwise (code read from stdin) from ``/dev/tty``. When no answer can
    be read the call is rejected with a message saying how to auto-approve, and so is every later
    call. The question names the call from the host's registry (see
    :func:`~ipybox_core.terminal.registered_call`); a request naming no registered tool is rejected
    without asking. It starts on a fresh line when the code's ``output`` left one unfinished.
    """

    def __init__(
        self,
        *,
        auto_approve: bool,
        answers_from_stdin: bool,
        console: Console,
        output: CodeOutput | None = None,
    ) -> None:
        self.auto_approve = auto_approve
        self.answers_from_stdin = answers_from_stdin
        self.console = console
        self.output = output
        self._no_answers: str | None = None

    async def decide(self, request: ApprovalRequest, servers: Mapping[str, RegisteredServer]) -> None:
        """Ask about ``request`` (the executor's ``servers`` name it) and accept or reject it."""
        call = registered_call(request, servers)
        if call is None:
            self.console.warn(f"{UNREGISTERED_MESSAGE} ({request.name!r})")
            await request.reject(UNREGISTERED_MESSAGE)
            return
        question = approval_question(call)
        if self._no_answers is None:
            answer = await self._ask(question)
        else:
            self.console.info(f"{self._fresh_line()}{question} [y/N] (no answer: rejected)")
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
        if self.console.colour:
            question = question.replace("approve", self.console.style("approve", "bold", "cyan"), 1)
        if self.auto_approve:
            self._lead(self.console.stream, separator=False)
            return await ask(question, auto=True, prompt=self.console.stream, auto_label="y (--yes)")
        if self.answers_from_stdin:
            self._lead(self.console.stream)
            return await ask(question, source=sys.stdin, prompt=self.console.stream)
        try:
            tty = open("/dev/tty", "r+", encoding="utf-8")  # noqa: SIM115, ASYNC230 - closed below; never blocks
        except OSError:
            return None
        with tty:
            self._lead(tty)
            return await ask(question, source=tty, prompt=tty)

    def _lead(self, stream: TextIO, *, separator: bool = True) -> None:
        """What comes before a question: a newline ending the code's line, the separator line."""
        lead = self._fresh_line()
        if separator:
            lead += self.console.style(SEPARATOR, "dim") + "\n"
        stream.write(lead)
        stream.flush()

    def _fresh_line(self) -> str:
        if self.output is None or not self.output.mid_line:
            return ""
        self.output.mid_line = False
        return "\n"
