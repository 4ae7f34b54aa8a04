"""Schema constraints: checked in the kernel where Python can, named in help() where it cannot."""

from __future__ import annotations

import inspect
import pydoc
import warnings
from typing import Any

import pytest
from codegen_kit import (
    Generator,
    Outcome,
    ThreadedToolServer,
    generate_fixture,
    one,
    sent,
    served_fixture,
    tool,
)
from pydantic import ValidationError

served = served_fixture()
generate = generate_fixture()


def page(fn: Any) -> str:
    return " ".join(pydoc.render_doc(fn, renderer=pydoc.plaintext).split())


def test_patterns_python_reads_are_checked_by_search(generate: Generator, served: ThreadedToolServer) -> None:
    fn = one(
        generate,
        tool(
            "p",
            {
                "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "word": {"type": "string", "pattern": "b"},
                "after": {"type": "string", "pattern": "(?<=a)b"},  # look-behind: fine for Python's re
            },
        ),
    )
    assert sent(served, fn, code="EUR", word="abc", after="ab") == {
        "code": "EUR",
        "word": "abc",
        "after": "ab",
    }
    for bad in ({"code": "eur"}, {"word": "xyz"}, {"after": "cb"}):
        with pytest.raises(ValidationError, match="pattern"):
            fn(**bad)
    assert "code: (pattern '^[A-Z]{3}$')" in page(fn)


def test_patterns_python_reads_differently_are_left_to_the_server_and_said_so(
    generate: Generator, served: ThreadedToolServer
) -> None:
    fn = one(
        generate,
        tool(
            "p",
            {
                "letters": {"type": "string", "pattern": "^\\p{L}+$"},
                "year": {"type": "string", "pattern": "(?<year>\\d{4})"},
            },
        ),
    )
    assert sent(served, fn, letters="123", year="no") == {"letters": "123", "year": "no"}
    text = page(fn)
    assert "letters: (pattern '^\\\\p{L}+$': not checked here)" in text
    assert "year: (pattern '(?<year>\\\\d{4})': not checked here)" in text


def test_multiple_of_and_unique_items(generate: Generator, served: ThreadedToolServer) -> None:
    fn = one(
        generate,
        tool(
            "m",
            {
                "n": {"type": "integer", "multipleOf": 5},
                "price": {"type": "number", "multipleOf": 0.01},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                "points": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {"type": "object", "properties": {"x": {"type": "integer"}}},
                },
            },
        ),
    )
    assert sent(served, fn, n=10, price=0.07, tags=["a", "b"], points=[{"x": 1}, {"x": 2}]) == {
        "n": 10,
        "price": 0.07,
        "tags": ["a", "b"],
        "points": [{"x": 1}, {"x": 2}],
    }
    with pytest.raises(ValidationError, match="multiple of 5"):
        fn(n=7)
    with pytest.raises(ValidationError, match="unique"):
        fn(tags=["a", "a"])
    with pytest.raises(ValidationError, match="unique"):
        fn(points=[{"x": 1}, {"x": 1}])
    assert sent(served, fn, tags=None) == {}  # not given: nothing to check
    text = page(fn)
    assert "n: (multiple of 5)" in text and "tags: (unique items)" in text


def test_what_the_kernel_does_not_check_is_named_in_help(
    generate: Generator, served: ThreadedToolServer
) -> None:
    fn = one(
        generate,
        tool(
            "f",
            {
                "when": {"type": "string", "format": "time", "description": "Start"},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
                "labels": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
            },
        ),
    )
    assert sent(served, fn, when="tomorrow", pair=[1, "a"], labels={"y": 1}) == {
        "when": "tomorrow",
        "pair": [1, "a"],
        "labels": {"y": 1},
    }
    text = page(fn)
    assert "when: Start (format 'time': not checked here)" in text
    assert "pair: (item types by position: not checked here" in text
    assert "labels: (keys matching '^x-': not checked here" in text


def test_result_models_document_their_constraints(generate: Generator, served: ThreadedToolServer) -> None:
    schema = {
        "type": "object",
        "title": "Rate",
        "properties": {
            "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "at": {"type": "string", "format": "date"},
        },
    }
    imported = generate("srv", [tool("rate", output_schema=schema)])
    doc = " ".join(pydoc.render_doc(imported.module.Rate, renderer=pydoc.plaintext).split())
    assert "currency (str | None = None): (pattern '^[A-Z]{3}$')" in doc
    assert "at (date | None = None)" in doc and "format 'date'" not in doc  # a date, checked
    served.backend.reply = Outcome(structured={"currency": "usd"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = imported.module.rate()
    assert result.currency == "usd" and "pattern" in str(caught[0].message)


def test_defaults_are_shown_as_values(generate: Generator) -> None:
    url = "https://raw.githubusercontent.com/modelcontextprotocol/servers/refs/heads/main/README.md"
    fn = one(generate, tool("gz", {"data": {"type": "string", "default": url}}))
    assert str(inspect.signature(fn)) == f"(*, data: str = {url!r}) -> str"


def test_items_and_values_keep_their_own_constraints(generate: Generator, served: ThreadedToolServer) -> None:
    """Bounds of an array's items and a map's values hold in the kernel (were dropped: no field holds them)."""
    fn = one(
        generate,
        tool(
            "t",
            {
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3},
                "scores": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
                "point": {
                    "type": "array",
                    "prefixItems": [{"type": "number", "minimum": 0}, {"type": "number", "maximum": 90}],
                    "minItems": 2,
                    "maxItems": 2,
                },
                "grid": {
                    "type": "array",
                    "items": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
                },
            },
        ),
    )
    before = len(served.backend.calls)
    for kwargs in (
        {"tags": ["abcdef"]},
        {"scores": {"a": -1}},
        {"point": [-1, 0]},
        {"point": [0, 91.5]},
        {"grid": [[1], []]},
    ):
        with pytest.raises(ValidationError):
            fn(**kwargs)
    with pytest.raises(ValidationError, match="at most 5 characters"):
        fn(tags=["abcdef"])
    assert len(served.backend.calls) == before
    valid = {"tags": ["abcde"], "scores": {"a": 0}, "point": [0, 90], "grid": [[1], [2, 3]]}
    assert sent(served, fn, **valid) == valid
    text = page(fn)
    assert "tags: (max length 3; items: max length 5)" in text and "scores: (values: >= 0)" in text
    assert "point: (item 1: >= 0; item 2: <= 90)" in text and "grid: (items: min length 1)" in text
