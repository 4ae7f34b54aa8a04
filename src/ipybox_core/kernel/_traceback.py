"""Turning IPython's traceback entries into readable text without ipybox-internal frames."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from ipybox_core.kernel._text import strip_ansi

_HIDDEN_NOTE = re.compile(r"^\s*\[\.\.\. skipping hidden \d+ frames?\]\s*$\n?", re.MULTILINE)
_FRAME_HEAD = re.compile(r"^\s*File\s+(.+?):\d+")


def hidden_path_prefixes(directories: Iterable[Path], home: str | None) -> tuple[str, ...]:
    """The spellings under which IPython may show files from ``directories``.

    IPython prints frame paths absolute, or with the kernel's home directory shortened to ``~``.
    """
    prefixes: list[str] = []
    for directory in directories:
        for spelling in {str(directory), os.path.realpath(directory)}:
            prefix = spelling.rstrip("/") + "/"
            prefixes.append(prefix)
            if home and home != "/" and prefix.startswith(home.rstrip("/") + "/"):
                prefixes.append("~" + prefix[len(home.rstrip("/")) :])
    return tuple(dict.fromkeys(prefixes))


def clean_traceback(entries: Sequence[str], hidden_prefixes: Sequence[str]) -> str:
    """Join IPython's traceback entries into plain text.

    Removes ANSI codes, the dashed separator line, frames from files under ``hidden_prefixes`` and
    IPython's notes about frames hidden with ``__tracebackhide__``.
    """
    text_out = ""
    for entry in entries:
        text = _HIDDEN_NOTE.sub("", strip_ansi(entry)).rstrip("\n")
        stripped = text.strip()
        if not stripped or set(stripped) == {"-"}:
            continue
        frame = _FRAME_HEAD.match(text)
        if frame and frame.group(1).startswith(tuple(hidden_prefixes)):
            continue
        if text_out:
            text_out += "\n" if text_out.endswith("(most recent call last)") else "\n\n"
        text_out += text
    return text_out
