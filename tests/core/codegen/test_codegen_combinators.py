"""What a schema demands beyond types is kept (issue 27, item 7): ``allOf`` merged with its members'
constraints, ``$anchor`` references resolved, ``if``/``then``/``else`` and other untyped keywords named
in help(); what cannot be typed is typed ``Any`` with a note in the docstring (the tool is never dropped)."""

from __future__ import annotations

import pydoc
import warnings
from typing import Any

import pytest
from codegen_kit import Generator, ThreadedToolServer, generate_fixture, one, sent, served_fixture, tool
from pydantic import ValidationError

from ipybox_core.codegen import CodegenWarning

served = served_fixture()
generate = generate_fixture()


def page(fn: Any) -> str:
    return " ".join(pydoc.render_doc(fn, renderer=pydoc.plaintext).split())


def test_all_of_keeps_every_members_constraints(generate: Generator, served: ThreadedToolServer) -> None:
    schema = {
        "type": "object",
        "properties": {
            "span": {"allOf": [{"$ref": "#/$defs/Span"}, {"maximum": 9}], "description": "Days"},
            "who": {"allOf": [{"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
                              {"properties": {"name": {"type": "string", "maxLength": 3}}}]},
        },
        "$defs": {"Span": {"type": "integer", "minimum": 1}},
    }  # fmt: skip
    fn = one(generate, tool("book", input_schema=schema))
    assert sent(served, fn, span=5, who={"id": 1, "name": "abc"}) == {
        "span": 5,
        "who": {"id": 1, "name": "abc"},
    }
    for kwargs in ({"span": 0}, {"span": 10}, {"who": {"name": "a"}}, {"who": {"id": 1, "name": "abcd"}}):
        with pytest.raises(ValidationError):
            fn(**kwargs)
    assert "span: Days (>= 1; <= 9)" in page(fn)


def test_anchors_are_resolved(generate: Generator, served: ThreadedToolServer) -> None:
    schema = {
        "type": "object",
        "properties": {"point": {"$ref": "#pt"}, "next": {"$dynamicRef": "#pt"}},
        "$defs": {
            "P": {
                "$anchor": "pt",
                "type": "object",
                "properties": {"x": {"type": "integer"}},
                "required": ["x"],
            }
        },
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was: "'$ref' '#pt' cannot be resolved; typed as Any"
        fn = one(generate, tool("move", input_schema=schema))
    assert "point: Pt | None" in page(fn)  # named after the anchor
    assert sent(served, fn, point={"x": 1}, next={"x": 2}) == {"point": {"x": 1}, "next": {"x": 2}}
    with pytest.raises(ValidationError):
        fn(point={"x": "one"})


def test_conditionals_and_untyped_keywords_are_named_in_help(generate: Generator) -> None:
    schema = {
        "type": "object",
        "properties": {
            "kind": {"enum": ["card", "bank"]},
            "card_no": {"type": "string"},
            "code": {"allOf": [{"type": "string"}, {"not": {"const": "0000"}}, {"if": {"minLength": 5},
                                                                                 "then": {"pattern": "^X"}}]},
        },
        "if": {"properties": {"kind": {"const": "card"}}},
        "then": {"required": ["card_no"]},
        "dependentRequired": {"card_no": ["kind"]},
    }  # fmt: skip
    fn = one(generate, tool("pay", input_schema=schema))
    text = page(fn)
    assert (
        "The server also requires (not checked here): "
        'if {"properties":{"kind":{"const":"card"}}} then {"required":["card_no"]} '
        'dependentRequired {"card_no":["kind"]}'
    ) in text
    assert 'code: (not {"const":"0000"}: not checked here; if {"minLength":5} then {"pattern":"^X"}' in text


def test_an_unreadable_schema_gives_an_untyped_tool_with_a_note(generate: Generator) -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}, "n": {"type": "integer"}}}
    with pytest.warns(CodegenWarning, match=r"tool 'odd': '\$ref' '#/\$defs/missing' at property 'x'"):
        imported = generate("srv", [tool("odd", input_schema=schema)])
    text = page(imported.module.odd)
    assert "Schema notes (typed as Any where noted): '$ref' '#/$defs/missing' at property 'x' cannot" in text


def test_an_optional_values_constraints_hold(generate: Generator, served: ThreadedToolServer) -> None:
    schema = {
        "type": "object",
        "properties": {  # pydantic writes Optional[...] fields so: the bounds sit inside anyOf
            "name": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}], "default": None},
            "price": {"anyOf": [{"type": "number", "minimum": 0, "multipleOf": 0.01}, {"type": "null"}]},
            "site": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}]},
        },
    }
    fn = one(generate, tool("item", input_schema=schema))
    assert sent(served, fn, name=None, price=0.07) == {"name": None, "price": 0.07}
    assert sent(served, fn, price=3) == {"price": 3}
    for kwargs in ({"name": "abcd"}, {"price": -1}, {"price": 0.005}):
        with pytest.raises(ValidationError):
            fn(**kwargs)
    text = page(fn)
    assert "name: (max length 3)" in text and "price: (multiple of 0.01; >= 0)" in text
    assert "site: (format 'uri': not checked here)" in text


_EITHER = {
    "type": "object",
    "properties": {
        "value": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "integer", "minimum": 0}]},
        "ratio": {"oneOf": [{"type": "number", "maximum": 1}, {"type": "string", "pattern": "^[0-9]+%$"}]},
        "tags": {
            "anyOf": [
                {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 2},
                {"type": "string", "minLength": 1},
                {"type": "null"},
            ]
        },
        "code": {"maxLength": 3, "anyOf": [{"type": "string"}, {"type": "integer"}]},  # for the string
        "point": {
            "type": "object",
            "properties": {"v": {"anyOf": [{"type": "string", "minLength": 2}, {"type": "boolean"}]}},
        },
    },
}


def test_each_alternatives_constraints_hold(generate: Generator, served: ThreadedToolServer) -> None:
    """``anyOf`` of several values keeps each one's bounds (was: ``str | int``, nothing checked)."""
    fn = one(generate, tool("pick", input_schema=_EITHER))
    before = len(served.backend.calls)
    for kwargs in (
        {"value": "abcdef"},
        {"value": -1},
        {"ratio": 1.5},
        {"ratio": "half"},
        {"tags": ["a", "a"]},
        {"tags": ["a", "b", "c"]},
        {"tags": ""},
        {"code": "abcd"},
        {"point": {"v": "x"}},
    ):
        with pytest.raises(ValidationError):
            fn(**kwargs)
    assert len(served.backend.calls) == before  # nothing was sent
    with pytest.raises(ValidationError, match="at most 5 characters"):
        fn(value="abcdef")
    valid = {"value": "abcde", "ratio": 1, "tags": ["a", "b"], "code": 1234, "point": {"v": True}}
    assert sent(served, fn, **valid) == valid
    assert sent(served, fn, value=0, ratio="50%", tags="a", code="abc") == {
        "value": 0,
        "ratio": "50%",
        "tags": "a",
        "code": "abc",
    }
    assert sent(served, fn, value=2**64, ratio=0.5) == {"value": 2**64, "ratio": 0.5}


def test_each_alternatives_constraints_are_named_in_help_and_kept_readable(generate: Generator) -> None:
    imported = generate("srv", [tool("pick", input_schema=_EITHER)])
    fn = imported.module.pick
    text = page(fn)
    assert "value: (str: max length 5; int: >= 0)" in text
    assert "ratio: (float: <= 1; str: pattern '^[0-9]+%$')" in text
    assert "tags: (list[str]: max length 2, unique items; str: min length 1)" in text
    assert "def pick(*, value: str | int | None = None, ratio: float | str | None = None" in (
        imported.package.tools[0].signature
    )
    source = (imported.package.path / "_tools" / "pick.py").read_text()
    assert "value: _base.string(max_length=5) | Annotated[_base.Integer, Field(ge=0)] | None" in source
    assert "ratio: _base.number(le=1) | _base.string(pattern='^[0-9]+%$') | None" in source


def test_models_differing_only_in_an_alternatives_bounds_stay_two_classes(
    generate: Generator, served: ThreadedToolServer
) -> None:
    def schema(limit: int) -> dict[str, Any]:
        item = {"anyOf": [{"type": "string", "maxLength": limit}, {"type": "integer"}]}
        return {
            "type": "object",
            "properties": {"p": {"type": "object", "title": "P", "properties": {"v": item}}},
        }

    imported = generate("srv", [tool("a", input_schema=schema(2)), tool("b", input_schema=schema(4))])
    assert set(imported.package.models) == {"P", "P2"}
    assert sent(served, imported.module.b, p={"v": "abcd"}) == {"p": {"v": "abcd"}}
    with pytest.raises(ValidationError, match="at most 2 characters"):
        imported.module.a(p={"v": "abc"})
