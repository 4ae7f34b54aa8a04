"""Safe source text: docstrings and one-line summaries from arbitrary (hostile) descriptions."""

from __future__ import annotations

import re

SUMMARY_CHARS = 160

_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub(text: str) -> str:
    """``text`` with lone surrogates (valid in JSON, not encodable) replaced by U+FFFD.

    Class docstrings must be encodable (``type()`` fails otherwise), and so must prompts.
    """
    return _SURROGATE.sub("\ufffd", text)


def _escape_char(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape_quotes(run: re.Match[str]) -> str:
    return "".join('\\"' if index % 3 == 2 else '"' for index in range(len(run.group())))


def docstring(text: str, indent: str) -> str:
    """A triple-quoted literal whose value is ``text`` (continuation lines indented for the source).

    Backslashes, quote runs, control characters, lone surrogates and other non-printable
    characters are escaped, so no description can end the literal or break the module.
    Trailing whitespace is dropped, lone surrogates become U+FFFD (see :func:`scrub`), and tabs
    are expanded as a terminal would show the text (inside the indented docstring they would
    otherwise land on other columns).
    """
    text = scrub(text).expandtabs().rstrip()  # trailing whitespace means nothing in a docstring
    if not text:
        return '""""""'
    stripped = text.rstrip('"')
    trailing_quotes = len(text) - len(stripped)
    body = stripped.replace("\\", "\\\\")
    if not body.replace("\n", "").replace("\t", "").isprintable():
        body = "".join(c if c.isprintable() or c in "\n\t" else _escape_char(c) for c in body)
    body = _QUOTE_RUN.sub(_escape_quotes, body) + '\\"' * trailing_quotes
    body = body.replace("\n", "\n" + indent)
    if indent:
        body = _BLANK_INDENTED.sub("\n", body)  # no trailing whitespace on the empty lines
    if "\n" in body:
        return f'"""{body}\n{indent}"""'
    return f'"""{body}"""'


_QUOTE_RUN = re.compile('"{3,}')
_BLANK_INDENTED = re.compile(r"\n[ ]+(?=\n)")


def one_line(text: str) -> str:
    """``text`` on one line: whitespace runs and control characters become single spaces."""
    cleaned = "".join(char if char.isprintable() else " " for char in scrub(text))
    return " ".join(cleaned.split())


def summary(description: str, *, limit: int = SUMMARY_CHARS) -> str:
    """The first line of a description, cut at a sentence or word boundary within ``limit``."""
    for line in description.splitlines():
        text = one_line(line)
        if text:
            break
    else:
        return ""
    if len(text) <= limit:
        return text
    cut = text.rfind(". ", 0, limit)
    if cut >= limit // 3:
        return text[: cut + 1]
    cut = text.rfind(" ", 0, limit - 1)
    return (text[:cut] if cut >= limit // 3 else text[: limit - 1]).rstrip(" ,;:") + "…"
