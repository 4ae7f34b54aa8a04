"""Property-based: random valid JSON Schemas always give importable code whose functions accept valid
instances (sending exactly what validates against the original schema) and reject clearly invalid ones.

Each drawn schema comes with a strategy for its valid instances, built alongside it.
"""

from __future__ import annotations

import datetime as dt
import inspect
import itertools
import warnings
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import pytest
from codegen_kit import Generator, ThreadedToolServer, generate_fixture, served_fixture, tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

served = served_fixture()
generate = generate_fixture("module")  # hypothesis runs many examples per test

ODD_NAMES = [
    "from", "class", "2fa", "a-b", "a_b", "", "x y", "_id", "__v", "model_config", "schema", "json", "copy",
    "dict", "fields", "str", "list", "Any", "naïve", "q\"uote", "kwargs", "None", "self", "model_dump",
]  # fmt: skip

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@dataclass
class Node:
    """A schema, the definitions it needs hoisted to the root, and how to draw valid instances."""

    schema: dict[str, Any] | bool
    instances: st.SearchStrategy[Any]
    defs: dict[str, Any] = field(default_factory=dict)
    wrong: Any = None
    """A value the schema refuses, which the kernel must refuse too (``None``: no such value is known)."""
    children: list[tuple[str, Node, bool]] = field(default_factory=list)
    """For objects: (property, node, required)."""


_def_numbers = itertools.count()


def _utc_text(moment: dt.datetime) -> str:
    """An RFC 3339 date-time in UTC, as the kernel sends one (``...Z``)."""
    return moment.isoformat() + "Z"


def _leaves() -> st.SearchStrategy[Node]:
    def string(bounds: tuple[int, int] | None) -> Node:
        if bounds is None:
            return Node({"type": "string"}, st.text(max_size=8), wrong=[1])
        low, high = sorted(bounds)
        return Node(
            {"type": "string", "minLength": low, "maxLength": high},
            st.text(min_size=low, max_size=high),
            wrong=[1],
        )

    def integer(bounds: tuple[int, int] | None) -> Node:
        if bounds is None:
            return Node({"type": "integer"}, st.integers(), wrong=True)  # no bool for an integer
        low, high = sorted(bounds)
        return Node(
            {"type": "integer", "minimum": low, "maximum": high}, st.integers(low, high), wrong="nan?"
        )

    def enum(values: list[Any]) -> Node:
        return Node({"enum": values}, st.sampled_from(values), wrong="\x00not in the enum\x00")

    return st.one_of(
        st.one_of(st.none(), st.tuples(st.integers(0, 5), st.integers(0, 5))).map(string),
        st.one_of(st.none(), st.tuples(st.integers(-50, 50), st.integers(-50, 50))).map(integer),
        st.just(
            Node(
                {"type": "number"},
                # an int for a `number` is sent as that int, however large (2**53 + 1 is not a double)
                st.floats(allow_nan=False, allow_infinity=False) | st.integers(),
                wrong="x",
            )
        ),
        st.just(Node({"type": "boolean"}, st.booleans(), wrong=1)),  # no number for a bool
        st.just(Node({"type": "null"}, st.none())),
        st.just(
            Node(
                {"type": "string", "format": "uri", "description": 'a "URL"'}, st.text(max_size=5), wrong=[1]
            )
        ),
        st.just(Node({"type": "string", "format": "date"}, st.dates().map(dt.date.isoformat), wrong="today")),
        st.just(Node({"type": "string", "format": "uuid"}, st.uuids().map(str), wrong="not-a-uuid")),
        st.just(Node({"type": "string", "format": "date-time"}, st.datetimes().map(_utc_text), wrong="now")),
        st.lists(JSON_SCALARS, min_size=1, max_size=6, unique_by=lambda v: (type(v), v)).map(enum),
        JSON_SCALARS.map(lambda v: Node({"const": v}, st.just(v), wrong="\x00not the constant\x00")),
        st.sampled_from([{}, True]).map(lambda s: Node(s, JSON_VALUES)),
        st.just(_tree()),
    )


def _tree() -> Node:
    name = f"Tree{next(_def_numbers)}"
    schema = {
        "type": "object",
        "properties": {
            "v": {"type": "integer"},
            "kids": {"type": "array", "items": {"$ref": f"#/$defs/{name}"}},
        },
        "required": ["v"],
    }
    instances = st.recursive(
        st.builds(lambda v: {"v": v}, st.integers(-5, 5)),
        lambda inner: st.builds(
            lambda v, kids: {"v": v, "kids": kids}, st.integers(-5, 5), st.lists(inner, max_size=2)
        ),
        max_leaves=4,
    )
    return Node({"$ref": f"#/$defs/{name}"}, instances, {name: schema}, wrong=7)


def _object(properties: list[tuple[str, Node, bool]], additional: str) -> Node:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: node.schema for name, node, _ in properties},
    }
    required = [name for name, _, is_required in properties if is_required]
    if required:
        schema["required"] = required
    if additional == "false":
        schema["additionalProperties"] = False
    defs = {k: v for _, node, _ in properties for k, v in node.defs.items()}
    instances = st.fixed_dictionaries(
        {name: node.instances for name, node, is_required in properties if is_required},
        optional={name: node.instances for name, node, is_required in properties if not is_required},
    )
    return Node(schema, instances, defs, wrong=5, children=properties)


def _properties(
    children: st.SearchStrategy[Node], min_size: int
) -> st.SearchStrategy[list[tuple[str, Node, bool]]]:
    names = st.sampled_from(ODD_NAMES) | st.text(max_size=6)
    return st.lists(
        st.tuples(names, children, st.booleans()), min_size=min_size, max_size=4, unique_by=lambda p: p[0]
    )


def _composites(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    def array(node: Node) -> Node:
        return Node(
            {"type": "array", "items": node.schema}, st.lists(node.instances, max_size=3), node.defs, wrong=5
        )

    def pair(nodes: tuple[Node, Node]) -> Node:
        first, second = nodes
        schema = {"type": "array", "prefixItems": [first.schema, second.schema], "minItems": 2, "maxItems": 2}
        return Node(
            schema, st.tuples(first.instances, second.instances).map(list), {**first.defs, **second.defs}, 5
        )

    def mapping(node: Node) -> Node:
        schema = {"type": "object", "additionalProperties": node.schema}
        return Node(
            schema, st.dictionaries(st.text(max_size=4), node.instances, max_size=3), node.defs, wrong=5
        )

    def any_of(nodes: list[Node]) -> Node:
        schema = {"anyOf": [n.schema for n in nodes]}
        defs = {k: v for n in nodes for k, v in n.defs.items()}
        return Node(schema, st.one_of([n.instances for n in nodes]), defs)

    def nullable(node: Node) -> Node:
        return Node({"anyOf": [node.schema, {"type": "null"}]}, st.none() | node.instances, node.defs)

    def referenced(node: Node) -> Node:
        name = f"D{next(_def_numbers)}"
        return Node({"$ref": f"#/$defs/{name}"}, node.instances, {**node.defs, name: node.schema}, node.wrong)

    def all_of(node: Node) -> Node:
        return Node({"allOf": [node.schema], "description": "wrapped"}, node.instances, node.defs, node.wrong)

    return st.one_of(
        children.map(array),
        st.tuples(children, children).map(pair),
        children.map(mapping),
        st.lists(children, min_size=2, max_size=3).map(any_of),
        children.map(nullable),
        children.map(referenced),
        children.map(all_of),
        st.tuples(_properties(children, 1), st.sampled_from(["absent", "false"])).map(lambda a: _object(*a)),
    )


NODES = st.recursive(_leaves(), _composites, max_leaves=8)


@st.composite
def tool_schemas(draw: st.DrawFn) -> tuple[dict[str, Any], Node]:
    root = _object(draw(_properties(NODES, 0)), draw(st.sampled_from(["absent", "false"])))
    schema = dict(root.schema)  # type: ignore[arg-type]
    if root.defs:
        schema["$defs"] = root.defs
    return schema, root


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(drawn=tool_schemas(), data=st.data())
def test_random_schemas_accept_valid_and_reject_invalid_instances(
    drawn: tuple[dict[str, Any], Node], data: st.DataObject, generate: Generator, served: ThreadedToolServer
) -> None:
    schema, root = drawn
    validator = jsonschema.Draft202012Validator(schema)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a valid schema must not need any degradation
        imported = generate("prop", [tool("t", input_schema=schema)])
    generated = imported.package.tools[0]
    function = getattr(imported.module, generated.function)
    wire_to_kwarg = {wire: kwarg for kwarg, wire in generated.arguments.items()}

    instance = data.draw(root.instances, label="instance")
    validator.validate(instance)  # the strategy itself is sound
    function(**{wire_to_kwarg[wire]: value for wire, value in instance.items()})
    sent = served.backend.calls[-1][2]
    validator.validate(sent)
    assert sent == instance

    required = [
        (wire, node)
        for wire, node, is_required in root.children
        if is_required and node.wrong is not None and not validator.is_valid({**instance, wire: node.wrong})
    ]
    if required:
        wire, node = data.draw(st.sampled_from(required), label="broken property")
        before = len(served.backend.calls)
        with pytest.raises(ValidationError):
            function(**{wire_to_kwarg[w]: v for w, v in {**instance, wire: node.wrong}.items()})
        assert len(served.backend.calls) == before


KEYWORDS = [
    "type", "properties", "required", "items", "prefixItems", "additionalProperties", "enum", "const", "anyOf",
    "oneOf", "allOf", "$ref", "$defs", "definitions", "default", "description", "title", "nullable", "minimum",
    "maxLength", "format", "additionalItems", "patternProperties", "not", "minItems", "exclusiveMinimum",
]  # fmt: skip
REF_TARGETS = [
    "#",
    "#/$defs/a",
    "#/definitions/a",
    "#/properties/x",
    "#/$defs/missing",
    "a",
    "http://x/y",
    "#/a~1b",
]
TYPES = ["object", "string", "integer", "number", "boolean", "null", "array", "color"]
HOSTILE_LEAVES = st.one_of(
    JSON_SCALARS,
    st.sampled_from(REF_TARGETS),
    st.sampled_from(TYPES),
    st.lists(st.sampled_from(TYPES), max_size=3),
)
HOSTILE = st.recursive(
    HOSTILE_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYWORDS) | st.sampled_from(ODD_NAMES), inner, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(input_schema=HOSTILE, output_schema=st.none() | HOSTILE)
def test_arbitrary_json_as_schemas_always_gives_an_importable_function(
    input_schema: Any, output_schema: Any, generate: Generator
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degradations are expected here
        imported = generate("hostile", [tool("t", input_schema=input_schema, output_schema=output_schema)])
    function = getattr(imported.module, imported.package.tools[0].function)
    assert callable(function) and function.__doc__
    assert str(inspect.signature(function)).startswith("(")
    args_model = inspect.getmodule(function.__wrapped__)._Args  # type: ignore[union-attr]
    args_model.model_json_schema()  # the argument model builds
