"""Messages of the ``ipybox`` command on stderr: progress, warnings, errors; colours only on a TTY."""

from __future__ import annotations

import os
import sys
from typing import TextIO

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
    """Writes the command's own messages to ``stream`` (stderr), never mixed into program output."""

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
            self._write(self.style(f"{message} ...", "dim"))

    def info(self, message: str) -> None:
        if not self.quiet:
            self._write(message)

    def warn(self, message: str) -> None:
        self._write(self.style("ipybox: warning: ", "yellow", "bold") + message)

    def error(self, message: str) -> None:
        self._write(self.style("ipybox: error: ", "red", "bold") + message)

    def _write(self, text: str) -> None:
        print(text, file=self.stream, flush=True)
