"""How much memory parsing a JSON text can take, known before parsing it.

``json.loads`` turns a few bytes into objects of up to ~35 times their size (``{"a":{}}`` is 9 bytes
and two dicts of 248). Counting the characters that make objects (brackets, commas, colons, quotes)
bounds that from above in linear time at C speed, without building anything, so a kernel message
too costly to parse can be refused while it is still bytes.
"""

from __future__ import annotations

# Upper bounds, in bytes, of what CPython builds (64-bit; measured on 3.11, with slack).
_LIST = 56  # an empty list (its item pointers are counted per value)
_DICT = 184  # a dict with up to five entries
_ENTRY = 40  # each dict entry beyond that (amortised growth included)
_VALUE = 40  # a value's pointer in its container plus a number object (small ints are shared)
_STRING_OBJECT = 40  # a str object's header, per quote (a string has two)
_CHAR = 4  # a character, at the widest width a str may use
_TEXT = 4  # the decoded text json.loads makes of its input first (per input byte, at most)
_SLACK = 4096  # the parser's own state and rounding


def parsed_size_bound(raw: bytes) -> int:
    """An upper bound on the peak memory ``json.loads(raw)`` takes: the decoded text and the objects.

    Characters inside strings are counted as if they made objects too, and every byte as if it
    were a string's character: loose for text full of commas and colons, exact enough for the
    shapes that make parsing costly.
    """
    lists, dicts = raw.count(b"["), raw.count(b"{")
    commas, colons, quotes = raw.count(b","), raw.count(b":"), raw.count(b'"')
    values = commas + lists + colons + 1
    return (
        _LIST * lists
        + _DICT * dicts
        + _ENTRY * colons
        + _VALUE * values
        + _STRING_OBJECT * quotes
        + (_CHAR + _TEXT + 1) * len(raw)  # characters, the decoded text, the digits of numbers
        + _SLACK
    )


_MAX_PER_BYTE = _DICT + _CHAR + _TEXT + 1
"""No byte of input raises :func:`parsed_size_bound` by more than this (``{``)."""


def parse_fits(raw: bytes, limit: int) -> bool:
    """Whether parsing ``raw`` surely takes at most ``limit`` bytes (see :func:`parsed_size_bound`)."""
    if len(raw) * _MAX_PER_BYTE + _VALUE + _SLACK <= limit:  # small: no need to count
        return True
    return parsed_size_bound(raw) <= limit
