"""What the ``ipybox`` command writes: its own messages on stderr (progress, warnings, errors;
colours only on a TTY) and the executed code's output, both through
:func:`~ipybox_core.terminal.terminal_safe`."""

from __future__ import annotations

import os
import sys
from typing import TextIO

from ipybox_core.terminal import terminal_safe

_STYLES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def use_colour(stream: TextIO) -> bool:
    """Colours when ``stream`` is a terminal, ``NO_COLOR`` is unset and ``TERM`` is not ``dumb``."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Console:
    """Writes the command's own messages to ``stream`` (stderr), never mixed into program output.

    Messages may quote text from the code or an MCP server (an error's message), so they are
    escaped before they are styled: only the console's own styles reach the terminal as escapes.
    """

    def __init__(
        self, stream: TextIO | None = None, *, quiet: bool = False, colour: bool | None = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.colour = use_colour(self.stream) if colour is None else colour

    def style(self, text: str, *styles: str) -> str:
        if not self.colour or not styles:
            return text
        codes = ";".join(_STYLES[name] for name in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def progress(self, message: str) -> None:
        """A long step starts (connecting, generating); silent with ``quiet``."""
        if not self.quiet:
            self._write(self.style(f"{terminal_safe(message)} ...", "dim"))

    def info(self, message: str) -> None:
        if not self.quiet:
            self._write(terminal_safe(message))

    def warn(self, message: str) -> None:
        self._write(self.style("ipybox: warning: ", "yellow", "bold") + terminal_safe(message))

    def error(self, message: str) -> None:
        self._write(self.style("ipybox: error: ", "red", "bold") + terminal_safe(message))

    def _write(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


class CodeOutput:
    """The executed code's output on stdout and stderr, escaped with
    :func:`~ipybox_core.terminal.terminal_safe`; remembers whether the last line is unfinished, so
    that a question never continues a line the code began."""

    def __init__(self, stdout: TextIO | None = None, stderr: TextIO | None = None) -> None:
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.mid_line = False

    def write(self, text: str, *, stream: str = "stdout") -> None:
        """Show ``text`` (a chunk of the code's ``stream``) as it is, escaped."""
        if not text:
            return
        target = self.stderr if stream == "stderr" else self.stdout
        target.write(terminal_safe(text))
        target.flush()
        self.mid_line = not text.endswith("\n")

    def line(self, text: str, *, stream: str = "stdout") -> None:
        """Show ``text`` (a display, a traceback) as whole lines, escaped."""
        self.write(f"{text}\n", stream=stream)

    def flush(self) -> None:
        self.stdout.flush()
        self.stderr.flush()
