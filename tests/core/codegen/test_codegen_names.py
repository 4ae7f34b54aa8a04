"""Naming rules: identifiers, keywords, builtins, pydantic attributes, uniqueness."""

from __future__ import annotations

import keyword
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipybox_core.codegen._assign import assign_attributes, assign_kwargs, function_names
from ipybox_core.codegen._ir import ANY, FieldDef
from ipybox_core.codegen._names import (
    BASEMODEL_ATTRIBUTES,
    NameScope,
    attribute_name,
    class_name,
    file_module_name,
    function_name,
    identifier,
    kwarg_name,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("from", "from_"),
        ("class", "class_"),
        ("None", "None_"),
        ("2fa", "_2fa"),
        ("a-b", "a_b"),
        ("a--b", "a_b"),
        ("x y", "x_y"),
        ("$ref", "ref"),
        ("name?", "name"),
        ("", "unnamed"),
        ("!!!", "unnamed"),
        ("_id", "_id"),
        ("naïve", "naïve"),
        ("ﬁle", "file"),  # NFKC, as Python itself reads identifiers
        ("größe", "größe"),
        ("match", "match"),  # soft keywords are valid names
        ('say "hi"', "say_hi"),
    ],
)
def test_kwarg_names(raw: str, expected: str) -> None:
    assert kwarg_name(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("_id", "id_"),
        ("__v", "v__"),
        ("2fa", "field_2fa"),
        ("_", "field"),
        ("model_config", "model_config_"),
        ("schema", "schema_"),
        ("json", "json_"),
        ("copy", "copy_"),
        ("dict", "dict_"),
        ("fields", "fields_"),
        ("str", "str_"),
        ("Any", "Any_"),
        ("model_name", "model_name"),
        ("from", "from_"),
    ],
)
def test_attribute_names(raw: str, expected: str) -> None:
    reserved = frozenset({"str", "Any"})
    assert attribute_name(raw, reserved) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("text.to-upper", "text_to_upper"),
        ("github/search", "github_search"),
        ("list", "list_"),
        ("print", "print_"),
        ("display", "display_"),
        ("Any", "Any_"),
        ("__init__", "_init__"),
        ("3d-render", "_3d_render"),
    ],
)
def test_function_names(raw: str, expected: str) -> None:
    assert function_name(raw) == expected


def test_class_names() -> None:
    assert class_name("order summary", fallback="M") == "OrderSummary"
    assert class_name("to_upperOutput", fallback="M") == "ToUpperOutput"
    assert class_name("2d point", fallback="Model") == "Model2dPoint"
    assert class_name("any", fallback="M") == "AnyModel"
    assert class_name("list", fallback="M") == "List"  # builtin generics are lower-case
    assert class_name("!!!", fallback="Model") == "Model"


def test_file_module_names_are_ascii_and_case_folded() -> None:
    assert file_module_name("Search") == "search"
    assert file_module_name("größe").startswith("u_") and file_module_name("größe").isascii()


def test_collisions_resolve_deterministically_with_unchanged_names_first() -> None:
    assert function_names(["a-b", "a_b", "a.b"]) == {"a-b": "a_b_2", "a_b": "a_b", "a.b": "a_b_3"}
    fields = [FieldDef(wire=w, type=ANY, required=False) for w in ["from_", "from", "a-b", "a_b", "kwargs"]]
    assert assign_kwargs(fields) == "kwargs_2"
    assert [f.kwarg for f in fields] == ["from_", "from__2", "a_b_2", "a_b", "kwargs"]
    attrs = [FieldDef(wire=w, type=ANY, required=False) for w in ["_id", "id_", "id"]]
    assign_attributes(attrs, frozenset())
    assert [f.attr for f in attrs] == ["id__2", "id_", "id"]  # never another field's wire name


def test_name_scope_numbers_and_case_folding() -> None:
    scope = NameScope(["taken"], casefold=True)
    assert [scope.claim("taken"), scope.claim("Taken"), scope.claim("x")] == ["taken_2", "Taken_3", "x"]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20))
def test_any_text_gives_valid_unique_names(raw: str) -> None:
    assert identifier(raw, fallback="x").isidentifier()
    for name in (kwarg_name(raw), function_name(raw), attribute_name(raw, frozenset())):
        assert name.isidentifier() and not keyword.iskeyword(name)
        assert unicodedata.normalize("NFKC", name) == name
    attribute = attribute_name(raw, frozenset())
    assert not attribute.startswith("_") and attribute not in BASEMODEL_ATTRIBUTES
    assert class_name(raw, fallback="Model").isidentifier()
    compile(f"def f(*, {kwarg_name(raw)}=1): pass", "<test>", "exec")
