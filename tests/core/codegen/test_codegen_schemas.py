"""Every JSON Schema feature the generator handles: generated, imported, validated, sent on the wire."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest
from codegen_kit import (
    Generator,
    Imported,
    ThreadedToolServer,
    generate_fixture,
    one,
    sent,
    served_fixture,
    tool,
)
from pydantic import BaseModel, ValidationError

from ipybox_core.codegen import CodegenWarning
from ipybox_core.mcp.types import ToolInfo

served = served_fixture()
generate = generate_fixture()


def signature(fn: Any) -> str:
    return str(inspect.signature(fn))


# --- arguments ----------------------------------------------------------------------------------


def test_keyword_only_required_first_defaults_from_schema(
    generate: Generator, served: ThreadedToolServer
) -> None:
    fn = one(
        generate,
        tool(
            "search",
            {
                "limit": {"type": "integer", "default": 10},
                "query": {"type": "string", "description": "what to find"},
                "exact": {"type": "boolean"},
            },
            ["query"],
        ),
    )
    assert signature(fn) == "(*, query: str, limit: int = 10, exact: bool | None = None) -> str"
    assert sent(served, fn, query="x") == {"query": "x"}  # defaults the caller did not set are not sent
    assert sent(served, fn, query="x", limit=10, exact=False) == {"query": "x", "limit": 10, "exact": False}
    assert sent(served, fn, query="x", exact=None) == {"query": "x"}  # None for a non-nullable: omitted
    with pytest.raises(TypeError, match="keyword arguments only"):
        fn("x")
    with pytest.raises(ValidationError, match="query"):
        fn(limit=3)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        fn(query="x", qeury="y")


def test_wrong_type_is_a_validation_error_before_anything_is_sent(
    generate: Generator, served: ThreadedToolServer
) -> None:
    fn = one(generate, tool("add", {"a": {"type": "integer"}, "b": {"type": "number"}}, ["a", "b"]))
    before = len(served.backend.calls)
    with pytest.raises(ValidationError) as error:
        fn(a="one", b=2)
    assert "validation error for add" in str(error.value)
    assert len(served.backend.calls) == before
    assert sent(served, fn, a=1, b=2) == {"a": 1, "b": 2.0}


def test_enum_and_const_become_literals(generate: Generator, served: ThreadedToolServer) -> None:
    fn = one(
        generate,
        tool(
            "paint",
            {
                "color": {"type": "string", "enum": ["red", "green"]},
                "mixed": {"enum": ["a", 1, 2.5, True, None]},
                "odd": {"enum": ["with space", "it's", 'say "hi"', "", "\n"]},
                "fixed": {"const": "v1"},
            },
            ["color"],
        ),
    )
    text = signature(fn)
    assert "color: Literal['red', 'green']" in text
    assert "mixed: Literal['a', 1, 2.5, True] | None = None" in text
    assert "fixed: Literal['v1'] | None = None" in text
    assert sent(served, fn, color="red", mixed=None, odd='say "hi"', fixed="v1") == {
        "color": "red",
        "mixed": None,
        "odd": 'say "hi"',
        "fixed": "v1",
    }
    with pytest.raises(ValidationError):
        fn(color="blue")
    with pytest.raises(ValidationError):
        fn(color="red", fixed="v2")


def test_huge_enum_is_complete_in_code_and_short_in_the_signature(
    generate: Generator, served: ThreadedToolServer
) -> None:
    values = [f"v{i}" for i in range(3000)]
    fn = one(generate, tool("pick", {"value": {"enum": values}}, ["value"]))
    assert (
        "... and 2953 more]" in signature(fn) and len(signature(fn)) < 400
    )  # budget: MAX_SHOWN_LITERAL_CHARS
    assert sent(served, fn, value="v2999") == {"value": "v2999"}
    with pytest.raises(ValidationError):
        fn(value="v3000")


def test_python_keywords_and_invalid_identifiers_are_renamed_and_sent_by_wire_name(
    generate: Generator, served: ThreadedToolServer
) -> None:
    properties = {
        name: {"type": "string"}
        for name in ["from", "class", "2fa", "a-b", "a_b", "", "x y", "_id", "__v", "naïve", "ﬁle", "file"]
    }
    fn = one(generate, tool("odd", properties))
    params = list(inspect.signature(fn).parameters)
    assert params == [
        "from_",
        "class_",
        "_2fa",
        "a_b_2",
        "a_b",
        "unnamed",
        "x_y",
        "_id",
        "__v",
        "naïve",
        "file_2",
        "file",
    ]
    arguments = {name: f"value of {name}" for name in params}
    assert sent(served, fn, **arguments) == {
        wire: f"value of {kwarg}" for wire, kwarg in zip(properties, params, strict=True)
    }


def test_model_attribute_names_and_private_names_are_valid_arguments(
    generate: Generator, served: ThreadedToolServer
) -> None:
    names = [
        "model_config",
        "schema",
        "json",
        "copy",
        "dict",
        "fields",
        "model_dump",
        "validate",
        "str",
        "list",
    ]
    fn = one(generate, tool("collide", {name: {"type": "integer"} for name in names}, names))
    assert list(inspect.signature(fn).parameters) == names
    arguments = {name: index for index, name in enumerate(names)}
    assert sent(served, fn, **arguments) == arguments


def test_nested_objects_become_models_that_also_accept_dicts(
    generate: Generator, served: ThreadedToolServer
) -> None:
    imported = generate(
        "shop",
        [
            tool(
                "order",
                {
                    "customer": {
                        "type": "object",
                        "title": "Customer",
                        "properties": {
                            "name": {"type": "string"},
                            "from": {"type": "string"},
                            "_id": {"type": "integer"},
                            "address": {
                                "type": "object",
                                "properties": {"city": {"type": "string"}},
                                "required": ["city"],
                            },
                        },
                        "required": ["name", "address"],
                    }
                },
                ["customer"],
            )
        ],
    )
    customer_class = imported.Customer
    assert issubclass(customer_class, BaseModel)
    assert signature(imported.order) == "(*, customer: Customer) -> str"
    by_dict = sent(
        served, imported.order, customer={"name": "Ada", "from": "x", "_id": 1, "address": {"city": "Paris"}}
    )
    assert by_dict == {"customer": {"name": "Ada", "from": "x", "_id": 1, "address": {"city": "Paris"}}}
    model = customer_class(name="Ada", from_="x", id_=1, address={"city": "Paris"})
    assert sent(served, imported.order, customer=model) == by_dict
    with pytest.raises(ValidationError, match=r"customer\.address"):
        imported.order(customer={"name": "Ada"})


def test_refs_defs_definitions_and_recursion(generate: Generator, served: ThreadedToolServer) -> None:
    schema = {
        "type": "object",
        "properties": {
            "tree": {"$ref": "#/$defs/Node"},
            "tag": {"$ref": "#/definitions/Tag"},
            "pair": {"$ref": "#/$defs/A"},
        },
        "required": ["tree"],
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#"}},
                },
            },
            "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "n": {"type": "integer"}}},
        },
        "definitions": {"Tag": {"type": "string", "enum": ["x", "y"]}},
    }
    imported = generate("refs", [tool("walk", input_schema=schema)])
    fn = imported.walk
    assert "tree: Node" in signature(fn) and "tag: Literal['x', 'y'] | None" in signature(fn)
    tree = {"name": "root", "children": [{"tree": {"name": "leaf"}}]}
    assert sent(served, fn, tree=tree, pair={"b": {"a": {"b": {"n": 1}}}}) == {
        "tree": tree,
        "pair": {"b": {"a": {"b": {"n": 1}}}},
    }
    with pytest.raises(ValidationError):
        fn(tree={"name": 1})


def test_unresolvable_refs_and_odd_schemas_degrade_locally_with_a_warning(
    generate: Generator, served: ThreadedToolServer
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "missing": {"$ref": "#/$defs/Nope"},
            "remote": {"$ref": "https://example.com/schema.json"},
            "weird_type": {"type": "color"},
            "not_a_schema": 42,
            "anything": {},
            "always": True,
            "never": False,
            "ok": {"type": "integer"},
        },
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = one(generate, tool("strange", input_schema=schema))
    messages = sorted(str(w.message) for w in caught if w.category is CodegenWarning)
    assert len(messages) == 4, messages
    assert all(m.startswith("MCP server 'srv', tool 'strange': ") for m in messages)
    assert any("'#/$defs/Nope' at property 'missing' cannot be resolved" in m for m in messages)
    assert any("unknown type 'color' at property 'weird_type'" in m for m in messages)
    params = inspect.signature(fn).parameters
    assert "never" not in params
    assert str(params["missing"].annotation) == "Any"
    assert str(params["ok"].annotation) == "int | None"
    assert sent(served, fn, missing={"x": [1]}, weird_type="blue", ok=1) == {
        "missing": {"x": [1]},
        "weird_type": "blue",
        "ok": 1,
    }


def test_any_of_one_of_all_of_and_nullable(generate: Generator, served: ThreadedToolServer) -> None:
    schema = {
        "type": "object",
        "properties": {
            "id": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "maybe": {"type": ["string", "null"]},
            "legacy": {"type": "integer", "nullable": True},
            "shape": {
                "oneOf": [
                    {
                        "type": "object",
                        "title": "Circle",
                        "properties": {"r": {"type": "number"}},
                        "required": ["r"],
                    },
                    {"type": "object", "title": "Square", "properties": {"side": {"type": "number"}}},
                ]
            },
            "merged": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "string"}}},
                ]
            },
        },
    }
    fn = one(generate, tool("mix", input_schema=schema))
    text = signature(fn)
    assert "id: str | int | None = None" in text
    assert "maybe: str | None = None" in text
    assert "legacy: int | None = None" in text
    assert "shape: Circle | Square | None = None" in text
    assert sent(served, fn, id=5, maybe=None, legacy=None, shape={"r": 1}, merged={"a": 1, "b": "x"}) == {
        "id": 5,
        "maybe": None,  # nullable: an explicit None is sent
        "legacy": None,
        "shape": {"r": 1.0},
        "merged": {"a": 1, "b": "x"},
    }
    with pytest.raises(ValidationError):
        fn(merged={"b": "x"})


def test_arrays_tuples_and_additional_properties(generate: Generator, served: ThreadedToolServer) -> None:
    schema = {
        "type": "object",
        "properties": {
            "point": {
                "type": "array",
                "prefixItems": [{"type": "number"}, {"type": "number"}],
                "minItems": 2,
                "maxItems": 2,
            },
            "old_tuple": {
                "type": "array",
                "items": [{"type": "string"}, {"type": "integer"}],
                "additionalItems": False,
                "minItems": 2,
            },
            "open_tuple": {"type": "array", "prefixItems": [{"type": "string"}]},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "loose": {"type": "object"},
            "strict": {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "additionalProperties": False,
            },
            "typed_extra": {
                "type": "object",
                "properties": {"a": {"type": "integer"}},
                "additionalProperties": {"type": "integer"},
            },
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        },
    }
    fn = one(generate, tool("shapes", input_schema=schema))
    text = signature(fn)
    assert "point: tuple[float, float] | None" in text
    assert "old_tuple: tuple[str, int] | None" in text
    assert "open_tuple: list[Any] | None" in text
    assert "labels: dict[str, str] | None" in text
    assert "loose: dict[str, Any] | None" in text
    arguments = {
        "point": [1, 2],
        "old_tuple": ["a", 1],
        "open_tuple": ["a", 2, None],
        "labels": {"k": "v"},
        "loose": {"x": [1]},
        "strict": {"a": 1},
        "typed_extra": {"a": 1, "b": 2},
        "tags": ["t"],
    }
    wire = sent(served, fn, **arguments)
    assert wire == {**arguments, "point": [1.0, 2.0]}
    for bad in ({"strict": {"a": 1, "b": 2}}, {"typed_extra": {"b": "x"}}, {"tags": []}, {"point": [1]}):
        with pytest.raises(ValidationError):
            fn(**bad)


def test_constraints_are_checked_in_the_kernel(generate: Generator) -> None:
    fn = one(
        generate,
        tool(
            "bounded",
            {
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "x": {"type": "number", "exclusiveMinimum": 0},
                "old": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                "s": {"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-z]+$"},
            },
        ),
    )
    for bad in ({"n": 0}, {"n": 11}, {"x": 0}, {"old": 0}, {"s": "a"}, {"s": "abcd"}):
        with pytest.raises(ValidationError):
            fn(**bad)


def test_defaults_that_do_not_fit_are_dropped_and_required_defaults_are_always_sent(
    generate: Generator, served: ThreadedToolServer
) -> None:
    fn = one(
        generate,
        tool(
            "defaults",
            {
                "bad": {"type": "integer", "default": "ten"},
                "null_default": {"type": "string", "default": None},
                "mode": {"type": "string", "default": "fast"},
                "big": {"type": "array", "items": {"type": "integer"}, "default": list(range(30))},
                "inf": {"type": "number", "default": float("inf")},
            },
            ["mode"],
        ),
    )
    text = signature(fn)
    assert "bad: int | None = None" in text
    assert "null_default: str | None = None" in text
    assert "mode: str = 'fast'" in text
    assert "big: list[int] = ..." in text
    assert "inf: float = float('inf')" in text
    assert sent(served, fn) == {"mode": "fast"}  # required on the wire: its default is sent
    assert sent(served, fn, mode="slow", bad=3) == {"mode": "slow", "bad": 3}


def test_boolean_empty_and_typeless_input_schemas(generate: Generator, served: ThreadedToolServer) -> None:
    with pytest.warns(CodegenWarning, match=r"tool 't_string': the input schema has type 'string'"):
        imported = generate(
            "b",
            [
                tool("t_true", input_schema=True),
                tool("t_empty", input_schema={}),
                tool("t_typeless", input_schema={"properties": {"a": {"type": "integer"}}}),
                tool("t_open", input_schema={"type": "object", "additionalProperties": {"type": "string"}}),
                tool("t_string", input_schema={"type": "string"}),
            ],
        )
    assert signature(imported.t_true) == "() -> str"
    assert signature(imported.t_empty) == "() -> str"
    assert signature(imported.t_typeless) == "(*, a: int | None = None) -> str"
    assert signature(imported.t_open) == "(**kwargs: str) -> str"
    assert sent(served, imported.t_open, x="1", y="2") == {"x": "1", "y": "2"}
    with pytest.raises(ValidationError):
        imported.t_open(x=1)
    assert signature(imported.t_string) == "(**kwargs: Any) -> str"
    with pytest.raises(ValidationError):
        imported.t_true(x=1)


def test_deep_nesting_is_cut_off_with_a_warning(generate: Generator, served: ThreadedToolServer) -> None:
    node: dict[str, Any] = {"type": "integer"}
    for _ in range(200):
        node = {"type": "array", "items": node}
    with pytest.warns(CodegenWarning, match="deeper than"):
        fn = one(generate, tool("deep", {"x": node}, ["x"]))
    value: Any = 1
    for _ in range(200):
        value = [value]
    assert sent(served, fn, x=value) == {"x": value}


def test_one_hostile_tool_does_not_break_the_others(generate: Generator) -> None:
    hostile = ToolInfo(
        name="hostile", input_schema={"type": "object", "properties": {"a": {"allOf": "nope"}}}
    )
    bad_properties = ToolInfo(
        name="bad_properties", input_schema={"type": "object", "properties": ["a", "b"]}
    )
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        imported = generate(
            "mixed", [hostile, bad_properties, tool("fine", {"a": {"type": "integer"}}, ["a"])]
        )
    assert signature(imported.fine) == "(*, a: int) -> str"
    assert "hostile" in dir(imported.module) and "bad_properties" in dir(imported.module)


def test_tool_names_become_unique_functions_that_shadow_nothing(generate: Generator) -> None:
    names = [
        "get-user",
        "get.user",
        "get/user",
        "get user",
        "2fa",
        "class",
        "list",
        "print",
        "display",
        "a",
        "A",
    ]
    imported: Imported = generate("names", [tool(name) for name in names])
    functions = {t.tool: t.function for t in imported.package.tools}
    assert functions == {
        "2fa": "_2fa",
        "A": "A",
        "a": "a",
        "class": "class_",
        "display": "display_",
        "get user": "get_user",
        "get-user": "get_user_2",
        "get.user": "get_user_3",
        "get/user": "get_user_4",
        "list": "list_",
        "print": "print_",
    }
    for function in functions.values():
        assert callable(getattr(imported.module, function))
