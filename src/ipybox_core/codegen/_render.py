"""Python source of one tool module, and the compact text shown in signatures and prompts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ipybox_core.codegen._ir import (
    MISSING,
    NONE,
    UNIQUE,
    AnyType,
    Constrained,
    DictType,
    FieldDef,
    ListType,
    ModelDef,
    ModelRef,
    Primitive,
    ToolShape,
    TupleType,
    TypeExpr,
    UnionType,
    allows_none,
    checked_inside,
    optional,
    py_literal,
    referenced_models,
    render,
    uses_field,
    uses_name,
    without_none,
)
from ipybox_core.codegen._source import docstring, one_line, summary

MAX_SHOWN_DEFAULT = 100
"""Defaults with a longer Python spelling are shown as ``...`` in signatures (full text in help)."""

MAX_DOC_FIELDS = 60
MAX_LINE_FIELDS = 16

TEXT_RESULT = "str"


@dataclass(frozen=True)
class ToolSource:
    source: str
    signature: str
    """``def name(*, a: int, b: str = 'x') -> Result`` (compact annotations)."""
    models: tuple[str, ...]
    """Names of the models the signature refers to, directly or through their fields."""


def _python_type(field: FieldDef) -> TypeExpr:
    """A field's Python type: optional fields without default also take ``None`` (meaning: not sent)."""
    if field.python_required or field.default is not MISSING:
        return field.type
    return optional(field.type)


def _shown_default(field: FieldDef) -> str | None:
    if field.python_required:
        return None
    if field.default is MISSING:
        return "None"
    text = py_literal(field.default)
    return text if len(text) <= MAX_SHOWN_DEFAULT else "..."


def _parameter(field: FieldDef, quote: bool) -> str:
    annotation = render(_python_type(field), compact=True)
    default = _shown_default(field)
    return f"{field.kwarg}: {repr(annotation) if quote else annotation}" + (
        "" if default is None else f" = {default}"
    )


def ordered_params(shape: ToolShape) -> list[FieldDef]:
    """Required parameters first, each group in schema order."""
    return [f for f in shape.params if f.python_required] + [f for f in shape.params if not f.python_required]


def result_annotation(shape: ToolShape, *, compact: bool) -> str:
    if shape.result is None:
        return TEXT_RESULT
    return render(shape.result, compact=compact)


def signature(function: str, shape: ToolShape, kwargs_name: str, *, quote: bool = False) -> str:
    """The ``def`` line; ``quote``: annotations as string literals (the stub in the module, where
    they are only shown, never evaluated)."""
    params = [_parameter(f, quote) for f in ordered_params(shape)]
    if shape.extra_kwargs is not None:
        extra = render(shape.extra_kwargs, compact=True)
        params.append(f"**{kwargs_name}: {repr(extra) if quote else extra}")
    elif params:
        params.insert(0, "*")
    result = result_annotation(shape, compact=True)
    return f"def {function}({', '.join(params)}) -> {repr(result) if quote else result}"


def model_line(model: ModelDef) -> str:
    """``class Name: a: int; b: str | None = None`` — a model in one line, for prompts."""
    parts = []
    for field in model.fields[:MAX_LINE_FIELDS]:
        annotation = render(_python_type(field), compact=True)
        default = _shown_default(field)
        parts.append(f"{field.attr}: {annotation}" + ("" if default is None else f" = {default}"))
    if len(model.fields) > MAX_LINE_FIELDS:
        parts.append(f"...  # {len(model.fields) - MAX_LINE_FIELDS} more fields, see help({model.name})")
    if not parts:
        parts.append("..." if model.extra == "forbid" else "...  # any keys")
    return f"class {model.name}: " + "; ".join(parts)


def models_in_order(shape: ToolShape) -> list[ModelDef]:
    """The tool's distinct models (by name), each after the models its fields use."""
    by_name: dict[str, ModelDef] = {}
    for model in shape.models:
        by_name.setdefault(model.name, model)
    ordered: list[ModelDef] = []
    state: dict[str, int] = {}  # 1: visiting, 2: done

    def visit(model: ModelDef) -> None:
        name = model.name
        if state.get(name):
            return
        state[name] = 1
        for child in _children(by_name[name]):
            visit(child)
        state[name] = 2
        ordered.append(by_name[name])

    for model in by_name.values():
        visit(model)
    return ordered


def _children(model: ModelDef) -> list[ModelDef]:
    children = [m for f in model.fields for m in referenced_models(f.type)]
    if model.extra_type is not None:
        children.extend(referenced_models(model.extra_type))
    return children


def used_models(shape: ToolShape) -> tuple[str, ...]:
    """Names of the models reachable from the signature, in first-use order."""
    seen: dict[str, None] = {}
    stack: list[ModelDef] = []
    roots = [f.type for f in ordered_params(shape)]
    roots += [t for t in (shape.extra_kwargs, shape.result) if t is not None]
    for expr in roots:
        stack.extend(referenced_models(expr))
    stack.reverse()
    while stack:
        model = stack.pop()
        if model.name in seen:
            continue
        seen[model.name] = None
        stack.extend(reversed(_children(model)))
    return tuple(seen)


# --- module source ---------------------------------------------------------------------------------


def _annotation(expr: TypeExpr, defined: Callable[[ModelDef], bool]) -> str:
    """``expr`` as code; a string (resolved later by pydantic) when it names a model defined further
    down (a cycle) or the class being defined."""
    text = render(expr, compact=False, code=True)
    return text if all(defined(model) for model in referenced_models(expr)) else repr(text)


def _field_source(field: FieldDef, *, args: bool, defined: Callable[[ModelDef], bool]) -> str:
    """One field line of a model class (``args``: the argument model, validated by kwarg name)."""
    expr = _python_type(field)
    arguments: list[str] = []
    omit_none = not field.python_required and field.default is MISSING and not allows_none(field.type)
    if not field.python_required:
        arguments.append(py_literal(None if field.default is MISSING else field.default))
    if args:
        if field.kwarg == field.wire and field.attr != field.wire:
            arguments.append(f"alias={field.wire!r}")
        else:
            if field.kwarg != field.attr:
                arguments.append(f"validation_alias={field.kwarg!r}")
            if field.wire != field.attr:
                arguments.append(f"serialization_alias={field.wire!r}")
    elif field.wire != field.attr:
        arguments.append(f"alias={field.wire!r}")
    if omit_none:
        arguments.append("exclude_if=_base.is_none")
    checks = [f"{name}={py_literal(value)}" for name, value in field.constraints if name != _UNIQUE]
    value_type = without_none(field.type)
    inside = None if value_type is None else checked_inside(value_type, checks)
    if inside is None:
        arguments.extend(checks)
    if field.description and not args:
        arguments.append(f"description={field.description!r}")
    annotation = _annotation(expr, defined)
    if inside is not None:  # bounds inside the type (see CHECKED_INSIDE)
        annotation = inside + (" | None" if allows_none(expr) else "")
    if _unique(field):
        annotation = f"Annotated[{annotation}, _base.unique_items]"
    if not arguments:
        return f"{field.attr}: {annotation}"
    if len(arguments) == 1 and not field.python_required:
        return f"{field.attr}: {annotation} = {arguments[0]}"  # just the default
    if field.python_required:
        arguments.insert(0, "...")
    return f"{field.attr}: {annotation} = Field({', '.join(arguments)})"


def _class_source(
    defined: Callable[[ModelDef], bool],
    name: str,
    base: str,
    fields: list[FieldDef],
    *,
    args: bool,
    description: str,
    config: list[str],
    extra_type: TypeExpr | None,
) -> str:
    header = ", ".join([base, *config])
    lines = [f"class {name}({header}):"]
    if description:
        lines.append(f"    {docstring(description, '    ')}")
        lines.append("")
    if extra_type is not None:
        lines.append(f"    __pydantic_extra__: {_annotation(DictType(extra_type), defined)}")
    lines.extend(f"    {_field_source(f, args=args, defined=defined)}" for f in fields)
    if len(lines) == 1:
        lines.append("    pass")
    return "\n".join(lines)


def _model_source(model: ModelDef, defined: Callable[[ModelDef], bool]) -> str:
    config = ["extra='forbid'"] if model.extra == "forbid" else []
    return _class_source(
        defined,
        model.name,
        "_base.Model",
        model.fields,
        args=False,
        description=model_doc(model),
        config=config,
        extra_type=model.extra_type,
    )


def _param_doc(field: FieldDef) -> str:
    notes: list[str] = []
    if field.wire != field.kwarg:
        notes.append(f"sent as {field.wire!r}")
    if not field.python_required and field.default is not MISSING:
        shown = py_literal(field.default)
        if len(shown) > MAX_SHOWN_DEFAULT:
            notes.append(f"default: {shown}")
    notes.extend(_constraint_notes(field))
    shown_type = render(field.type, compact=True)
    full_type = render(field.type, compact=False)
    if shown_type != full_type:
        notes.append(f"type: {full_type}")
    text = field.description.strip()
    if notes:
        text = f"{text} ({'; '.join(notes)})" if text else f"({'; '.join(notes)})"
    return f"{field.kwarg}: {text}" if text else ""


_UNIQUE = UNIQUE
_TYPING: tuple[Literal["Annotated", "Any", "Literal"], ...] = ("Annotated", "Any", "Literal")


def _unique(field: FieldDef) -> bool:
    return any(name == _UNIQUE for name, _ in field.constraints)


def _constraint_notes(field: FieldDef) -> list[str]:
    checked = [_constraint_text(name, value) for name, value in field.constraints]
    members = field.type.members if isinstance(field.type, UnionType) else (field.type,)
    if Primitive("base64") in members:
        checked.append("base64 text: a str, or the bytes of base64.b64encode(data)")
    for member in members:  # a union member's own constraints: "str: max length 5"
        if isinstance(member, Constrained):
            checked.append(f"{render(member.base, compact=True)}: {_constraints_text(member)}")
        checked.extend(_inner_notes(member))
    return checked + [f"{note}: not checked here" for note in field.unchecked]


def _inner_notes(expr: TypeExpr) -> list[str]:
    """The constraints of a list's items and a dict's values: ``items: max length 5`` (also of
    optional ones: ``items: max length 5 or None``)."""
    expr = expr.base if isinstance(expr, Constrained) else expr
    if isinstance(expr, ListType | DictType):
        inner = expr.item if isinstance(expr, ListType) else expr.value
        where = "items" if isinstance(expr, ListType) else "values"
        text = _inner_text(inner)
        return [f"{where}: {text}"] if text else []
    if isinstance(expr, TupleType):
        texts = [(index, _inner_text(item)) for index, item in enumerate(expr.items, 1)]
        return [f"item {index}: {text}" for index, text in texts if text]
    return []


def _inner_text(inner: TypeExpr) -> str:
    value = without_none(inner)
    if not isinstance(value, Constrained):
        return ""
    return _constraints_text(value) + (" or None" if value is not inner else "")


def _constraints_text(expr: Constrained) -> str:
    return ", ".join(_constraint_text(name, value) for name, value in expr.constraints)


def _constraint_text(name: str, value: int | float | str | bool) -> str:
    return "unique items" if name == _UNIQUE else f"{_CONSTRAINT_TEXT[name]} {py_literal(value)}"


_CONSTRAINT_TEXT = {
    "ge": ">=",
    "le": "<=",
    "gt": ">",
    "lt": "<",
    "min_length": "min length",
    "max_length": "max length",
    "multiple_of": "multiple of",
    "pattern": "pattern",
}


def _result_doc(shape: ToolShape) -> list[str]:
    if shape.result is None:
        return [
            "str: the tool's text output, a ToolResult: a str whose .structured holds the",
            "structured data the server sent (None if none), with .content and .images.",
        ]
    lines = [f"{render(shape.result, compact=True)}"]
    if isinstance(shape.result, ModelRef):
        model = shape.result.model
        if model.description:
            lines[0] += f": {summary(model.description)}"
        lines.extend("    " + line for line in _field_lines(model))
    return lines


def _field_lines(model: ModelDef) -> list[str]:
    """``name (type = default): description (notes)``, one line per field."""
    lines = []
    for field in model.fields[:MAX_DOC_FIELDS]:
        default = _shown_default(field)
        text = f"{field.attr} ({render(_python_type(field), compact=True)}"
        text += ")" if default is None else f" = {default})"
        notes = ([f"{field.wire!r} in the JSON"] if field.wire != field.attr else []) + _constraint_notes(
            field
        )
        described = one_line(field.description)
        if described or notes:
            text += ": " + " ".join([described, f"({'; '.join(notes)})" if notes else ""]).strip()
        lines.append(text)
    if len(model.fields) > MAX_DOC_FIELDS:
        lines.append(f"... {len(model.fields) - MAX_DOC_FIELDS} more fields: help({model.name})")
    return lines


def model_doc(model: ModelDef) -> str:
    """A model's docstring: its description and one line per field (what ``help(Model)`` shows)."""
    parts = [model.description.strip()] if model.description.strip() else []
    fields = _field_lines(model)
    if fields:
        parts.append("Fields:\n" + "\n".join("    " + line for line in fields))
    extra = "no other keys" if model.extra == "forbid" else "other keys are kept"
    if model.extra_type is not None:
        extra = f"other keys: {render(model.extra_type, compact=True)}"
    parts.append(
        f'A pydantic model ({extra}): model.field or model["field"]; print(model) shows it as JSON;\n'
        "model.model_dump() is a dict. A dict works wherever this model is expected."
    )
    return "\n\n".join(parts)


def package_doc(
    header: str, tools: list[tuple[str, str]], model_lines: list[str], left_out: dict[str, str] | None = None
) -> str:
    """The docstring of a server's package: each tool's signature and summary, each model in one line,
    and the tools it lists that have no function.

    ``tools``: (``def`` line, summary) pairs; ``left_out``: MCP tool name → why.
    """
    lines = [header, "", "Tools (keyword arguments only; help(<function>) shows one in full):"]
    for signature_line, text in tools:
        lines.append("    " + signature_line.removeprefix("def "))
        if text:
            lines.append("        " + text)
    if model_lines:
        lines += ["", "Models (help(<Model>) shows one; a dict works wherever a model is expected):"]
        lines.extend("    " + line for line in model_lines)
    if left_out:
        lines += ["", "Left out (the server lists them; they have no function here):"]
        lines.extend(f"    {one_line(name)}: {why}" for name, why in left_out.items())
    return "\n".join(lines)


def function_doc(description: str, shape: ToolShape) -> str:
    parts = [description.strip() or "(no description)"]
    documented = [doc for doc in (_param_doc(f) for f in ordered_params(shape)) if doc]
    if documented:
        parts.append("Args:\n" + "\n".join("    " + doc.replace("\n", "\n        ") for doc in documented))
    parts.append("Returns:\n" + "\n".join("    " + line for line in _result_doc(shape)))
    if shape.unchecked:
        parts.append(_noted("The server also requires (not checked here):", shape.unchecked))
    if shape.notes:
        parts.append(_noted("Schema notes (typed as Any where noted):", shape.notes))
    return "\n\n".join(parts)


def _noted(title: str, notes: tuple[str, ...]) -> str:
    return title + "".join("\n    " + note for note in notes)


def module_source(server: str, tool: str, function: str, shape: ToolShape, kwargs_name: str) -> ToolSource:
    """The complete module for one tool: its models, argument model and function."""
    models = models_in_order(shape)
    params = ordered_params(shape)
    exprs = [f.type for m in models for f in m.fields] + [f.type for f in params]
    exprs += [t for t in [shape.result, shape.extra_kwargs, *(m.extra_type for m in models)] if t is not None]
    typing_names = [name for name in _TYPING if any(uses_name(e, name) for e in exprs)]
    fields = [*params, *(f for m in models for f in m.fields)]
    if "Annotated" not in typing_names and any(_unique(f) for f in fields):
        typing_names.insert(0, "Annotated")

    head = docstring(f"Tool {tool!r} of the MCP server {server!r} (generated by ipybox; do not edit).", "")
    done: set[str] = set()

    def defined(model: ModelDef) -> bool:
        return model.name in done

    blocks = []
    for model in models:
        blocks.append(_model_source(model, defined))
        done.add(model.name)

    args_config = [f"title={function!r}"]
    if shape.extra_kwargs is not None:
        args_config.append("extra='allow'")
    typed_extra = None if isinstance(shape.extra_kwargs, AnyType) else shape.extra_kwargs
    blocks.append(
        _class_source(
            defined,
            "_Args",
            "_base.Args",
            params,
            args=True,
            description="",
            config=args_config,
            extra_type=typed_extra,
        )
    )
    needs_field = any("= Field(" in block for block in blocks) or any(uses_field(e) for e in exprs)

    imports = []
    if typing_names:
        imports.append(f"from typing import {', '.join(typing_names)}")
    if needs_field:
        imports.append("from pydantic import Field")
    if typing_names or needs_field:
        imports.append("")
    imports.append("from .. import _base")

    decorator = [repr(server), repr(tool), "_Args"]
    if shape.result is not None:
        result_code = "type(None)" if shape.result == NONE else render(shape.result, compact=False, code=True)
        decorator += [f"result={result_code}", "structured=True"]
        if shape.unwrap:
            decorator.append("unwrap=True")
    always = tuple(f.attr for f in params if f.always_sent)
    if always:
        decorator.append(f"always={always!r}")
    stub = signature(function, shape, kwargs_name, quote=True)
    doc = docstring(function_doc(shape.description, shape), "    ")
    blocks.append(f"@_base.tool({', '.join(decorator)})\n{stub}:\n    {doc}")
    source = head + "\n\n" + "\n".join(imports) + "\n\n\n" + "\n\n\n".join(blocks) + "\n"
    return ToolSource(
        source=source, signature=signature(function, shape, kwargs_name), models=used_models(shape)
    )
