"""An optional value inside a container (``anyOf [X, null]``, ``type: [X, "null"]``, ``nullable``)
keeps the constraints of X: a list's items, a map's values, a tuple's positions (issue 27)."""

from __future__ import annotations

import pydoc
from typing import Any

import pytest
from codegen_kit import ThreadedToolServer, generate_fixture, one, sent, served_fixture, tool
from pydantic import ValidationError

served = served_fixture()
generate = generate_fixture()

SHORT = {"type": "string", "maxLength": 3}
SMALL = {"type": "integer", "minimum": 0, "maximum": 9}
NULL = {"type": "null"}

CASES: dict[str, tuple[dict[str, Any], list[Any], Any]] = {
    # name: (schema of the parameter, values refused, a valid value with a None in it)
    "field_type_list": ({"type": ["string", "null"], "maxLength": 3}, ["abcd"], None),
    "field_nullable": ({"type": "integer", "maximum": 9, "nullable": True}, [10], None),
    "list_any_of": (
        {"type": "array", "items": {"anyOf": [SHORT, NULL]}},
        [["abcd"], ["ok", "abcd"]],
        ["abc", None],
    ),
    "list_one_of": (
        {"type": "array", "items": {"oneOf": [SMALL, NULL]}},
        [[10], [-1]],
        [0, None, 9],
    ),
    "list_type_list": (
        {"type": "array", "items": {"type": ["string", "null"], "maxLength": 3}},
        [["abcd"]],
        [None, "abc"],
    ),
    "list_nullable": (
        {"type": "array", "items": {"type": "string", "maxLength": 3, "nullable": True}},
        [["abcd"]],
        ["abc", None],
    ),
    "list_ref": (
        {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/Short"}, NULL]}},
        [["abcd"]],
        ["abc", None],
    ),
    "map_any_of": (
        {"type": "object", "additionalProperties": {"anyOf": [SMALL, NULL]}},
        [{"a": 10}, {"a": 1, "b": -1}],
        {"a": 0, "b": None},
    ),
    "map_type_list": (
        {"type": "object", "additionalProperties": {"type": ["integer", "null"], "maximum": 9}},
        [{"a": 10}],
        {"a": None, "b": 9},
    ),
    "nested_list": (
        {"type": "array", "items": {"type": "array", "items": {"anyOf": [SHORT, NULL]}}},
        [[["abcd"]], [["ok"], [None, "abcd"]]],
        [["abc", None], []],
    ),
    "optional_list_of_optional": (
        {"anyOf": [{"type": "array", "items": {"anyOf": [SHORT, NULL]}, "maxItems": 2}, NULL]},
        [["abcd"], ["a", "b", "c"]],
        ["abc", None],
    ),
    "tuple_position": (
        {
            "type": "array",
            "prefixItems": [{"anyOf": [SHORT, NULL]}, {"type": ["integer", "null"], "minimum": 0}],
            "minItems": 2,
            "maxItems": 2,
        },
        [["abcd", 0], ["ab", -1]],
        [None, None],
    ),
    "multi_type": ({"type": ["string", "integer"], "maxLength": 3, "minimum": 0}, ["abcd", -1], "abc"),
    "multi_type_list": (
        {"type": "array", "items": {"type": ["string", "integer", "null"], "maxLength": 3, "minimum": 0}},
        [["abcd"], [-1]],
        ["abc", 0, None],
    ),
    "model_extra": (
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": {"anyOf": [SMALL, NULL]},
        },
        [{"a": "x", "b": 10}],
        {"a": "x", "b": None, "c": 9},
    ),
    "list_of_bounded_list_or_null": (
        {"type": "array", "items": {"anyOf": [{"type": "array", "items": SMALL, "minItems": 1}, NULL]}},
        [[[]], [[10]]],
        [None, [9]],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_optional_value_in_a_container_keeps_its_constraints(
    case: str, generate: Any, served: ThreadedToolServer
) -> None:
    schema, refused, valid = CASES[case]
    input_schema = {"type": "object", "properties": {"value": schema}, "$defs": {"Short": SHORT}}
    fn = one(generate, tool(f"t_{case}", input_schema=input_schema))
    before = len(served.backend.calls)
    for value in refused:
        with pytest.raises(ValidationError):
            fn(value=value)
    assert len(served.backend.calls) == before  # nothing refused was sent
    assert sent(served, fn, value=valid) == {"value": valid}


def test_the_message_and_help_name_the_bound(generate: Any) -> None:
    properties = {
        "names": {"type": "array", "items": {"anyOf": [SHORT, NULL]}},
        "scores": {"type": "object", "additionalProperties": {"type": ["integer", "null"], "maximum": 9}},
        "pair": {
            "type": "array",
            "prefixItems": [SHORT, {"anyOf": [SMALL, NULL]}],
            "minItems": 2,
            "maxItems": 2,
        },
    }
    fn = one(generate, tool("t_message", properties))
    with pytest.raises(ValidationError, match="at most 3 characters"):
        fn(names=["abcd"])
    text = " ".join(pydoc.render_doc(fn, renderer=pydoc.plaintext).split())
    assert "names: (items: max length 3 or None)" in text and "scores: (values: <= 9 or None)" in text
    assert "pair: (item 1: max length 3; item 2: >= 0, <= 9 or None)" in text


def test_the_keyword_arguments_keep_their_constraints(generate: Any, served: ThreadedToolServer) -> None:
    """A tool's additionalProperties (``**kwargs``), optional or not, keeps the bounds of its values."""
    schema = {
        "type": "object",
        "properties": {},
        "additionalProperties": {"type": ["integer", "null"], "maximum": 9},
    }
    fn = one(generate, tool("t_kwargs", input_schema=schema))
    with pytest.raises(ValidationError):
        fn(a=10)
    assert sent(served, fn, a=9, b=None) == {"a": 9, "b": None}
