"""Assigns the Python names of one server package: functions, model classes, fields, arguments.

Names are deterministic: tools are processed sorted by wire name, and names that need no change
win over sanitised ones (``a_b`` keeps its name; ``a-b`` becomes ``a_b_2``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from ipybox_core.codegen._ir import MISSING, FieldDef, ModelDef, ToolShape, TypeExpr, py_literal, render
from ipybox_core.codegen._names import (
    ANNOTATION_BUILTINS,
    MODULE_PRIVATE,
    TYPING_NAMES,
    NameScope,
    attribute_name,
    function_name,
    kwarg_name,
)

PACKAGE_NAMES = frozenset({"SERVER", "TOOLS"})
"""Public names the generated package ``__init__`` defines itself."""


def function_names(tools: Sequence[str]) -> dict[str, str]:
    """Wire tool name → unique function name (``tools`` sorted, without duplicates)."""
    scope = NameScope([*MODULE_PRIVATE, *PACKAGE_NAMES])
    names: dict[str, str] = {}
    for tool in tools:  # unchanged names first
        candidate = function_name(tool)
        if candidate == tool and not scope.taken(candidate):
            names[tool] = scope.claim(candidate)
    for tool in tools:
        if tool not in names:
            names[tool] = scope.claim(function_name(tool))
    return {tool: names[tool] for tool in tools}


def model_names(shapes: Iterable[ToolShape], taken: Iterable[str]) -> set[str]:
    """Names every model; structurally equal models with the same hint share a name."""
    scope = NameScope([*MODULE_PRIVATE, *PACKAGE_NAMES, *TYPING_NAMES, *taken])
    by_key: dict[tuple[str, str], str] = {}
    keys: dict[int, str] = {}
    for shape in shapes:
        for model in shape.models:
            key = (model.hint, _model_key(model, (), keys))
            name = by_key.get(key)
            if name is None:
                name = scope.claim(model.hint, separator="")
                by_key[key] = name
            model.name = name
    return set(by_key.values())


def _model_key(model: ModelDef, stack: tuple[ModelDef, ...], memo: dict[int, str]) -> str:
    """A structural fingerprint of ``model`` (descriptions ignored); cycles become back-references."""
    if model in stack:
        return f"@{len(stack) - stack.index(model)}"
    cached = memo.get(id(model))
    if cached is not None:
        return cached
    inner = (*stack, model)

    def type_key(expr: TypeExpr | None) -> str:
        if expr is None:
            return "-"
        return render(expr, compact=False, code=True, names=lambda m: "{" + _model_key(m, inner, memo) + "}")

    parts = [model.extra, type_key(model.extra_type)]
    for field in model.fields:
        default = "-" if field.default is MISSING else py_literal(field.default)
        parts.append(
            f"{field.wire!r}:{field.required}:{default}:{field.constraints}:{field.unchecked}:{type_key(field.type)}"
        )
    key = "|".join(parts)
    if "{@" not in key:  # context-free: no back-reference to an enclosing model
        memo[id(model)] = key
    return key


def attribute_reserved(model_names: Iterable[str]) -> frozenset[str]:
    """Names a model field must not take: they are used in the annotations of generated classes."""
    return frozenset({*ANNOTATION_BUILTINS, *TYPING_NAMES, *MODULE_PRIVATE, *model_names})


def _assign(
    fields: list[FieldDef], slot: Literal["attr", "kwarg"], make: Callable[[str], str], scope: NameScope
) -> None:
    """Set ``slot`` of every field; a sanitised name never equals another field's wire name."""
    for field in fields:  # names that need no change first
        candidate = make(field.wire)
        if candidate == field.wire and not scope.taken(candidate):
            setattr(field, slot, scope.claim(candidate))
    for field in fields:
        scope.reserve(field.wire)
    for field in fields:
        if not getattr(field, slot):
            setattr(field, slot, scope.claim(make(field.wire)))


def assign_attributes(fields: list[FieldDef], reserved: frozenset[str]) -> None:
    """Field (attribute) names of one model."""
    _assign(fields, "attr", lambda wire: attribute_name(wire, reserved), NameScope(reserved))


def assign_kwargs(fields: list[FieldDef]) -> str:
    """Keyword-argument names of a tool; returns the name for ``**kwargs``."""
    scope = NameScope()
    _assign(fields, "kwarg", kwarg_name, scope)
    return scope.claim("kwargs")


def assign_shape(shape: ToolShape, reserved: frozenset[str]) -> str:
    """All field and argument names of one tool; returns the ``**kwargs`` name."""
    seen: set[int] = set()
    for model in shape.models:
        if id(model) not in seen:
            seen.add(id(model))
            assign_attributes(model.fields, reserved)
    assign_attributes(shape.params, reserved)
    return assign_kwargs(shape.params)
