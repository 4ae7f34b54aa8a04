"""JSON Schema (draft 2020-12 and draft-07) → the intermediate form of :mod:`._ir`.

The converter is lenient by design: whatever it cannot express (unresolvable ``$ref``, unknown
types, recursion through non-object schemas, excessive depth) becomes ``Any`` at that spot and is
reported through ``warn``; it never raises for a strange schema. Python's validation is a
convenience in front of the server's, so being too permissive is safe and being too strict is not.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from ipybox_core.codegen._ir import (
    ANY,
    FORMATS,
    MISSING,
    NONE,
    STRINGS,
    Constrained,
    DictType,
    FieldDef,
    ListType,
    LiteralType,
    ModelDef,
    ModelRef,
    Primitive,
    ToolShape,
    TupleType,
    TypeExpr,
    UnionType,
    fits,
    union,
    without_none,
)
from ipybox_core.codegen._names import class_name

MAX_DEPTH = 24
"""Nesting deeper than this becomes ``Any`` (keeps annotations within the parser's limits)."""

_STRUCTURAL = frozenset(
    {
        "type",
        "properties",
        "additionalProperties",
        "patternProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "required",
    }
)
"""Keywords that change which values are valid (the rest only annotate)."""

_UNTYPED = (
    "if",
    "not",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "contains",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "unevaluatedItems",
)
"""Keywords no Python type expresses: the server checks them, help() names them (``if`` with
``then``/``else``; ``unevaluatedProperties: false`` is typed, as ``additionalProperties``)."""
_NOTES = "$ipybox:untyped"
"""Where merging (``allOf``, ``$ref`` siblings) keeps the untyped keywords of every member."""

_PRIMITIVES: dict[str, TypeExpr] = {
    "string": Primitive("str"),
    "integer": Primitive("int"),
    "number": Primitive("float"),
    "boolean": Primitive("bool"),
    "null": NONE,
}

_NUMBER_CONSTRAINTS = {
    "minimum": "ge",
    "maximum": "le",
    "exclusiveMinimum": "gt",
    "exclusiveMaximum": "lt",
}
_LENGTH_CONSTRAINTS = {"minLength": "min_length", "maxLength": "max_length"}
_ITEMS_CONSTRAINTS = {"minItems": "min_length", "maxItems": "max_length"}

Warn = Callable[[str], None]


def _bound(value: Any) -> int | float | None:
    """``value`` if it is a usable numeric bound (finite, not a bool, not absurdly large)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value if abs(value) < 2**63 else None


def _scalar(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, str | bool | int)
        or (isinstance(value, float) and math.isfinite(value))
    )


def _small_json(value: Any, depth: int = 0) -> bool:
    """Whether a default is small enough to show in a signature (and to write as a literal)."""
    if depth > 8:
        return False
    if isinstance(value, list):
        return len(value) <= 64 and all(_small_json(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return len(value) <= 64 and all(_small_json(item, depth + 1) for item in value.values())
    if isinstance(value, str):
        return len(value) <= 1000
    return True


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class SchemaConverter:
    """Converts the schemas of one JSON document (one tool's input or output schema)."""

    def __init__(self, document: Any, *, warn: Warn, models: list[ModelDef]) -> None:
        self._document = document
        self._warn = warn
        self._models = models
        self._by_ref: dict[str, ModelDef] = {}
        self._ref_stack: list[str] = []
        self._path: list[str] = []
        self.top_notes: tuple[str, ...] = ()
        """What the input schema's top level demands beyond its properties (see :func:`untyped_notes`)."""

    def _where(self) -> str:
        return f"property {'.'.join(self._path)!r}" if self._path else "the top level"

    # --- entry points ---------------------------------------------------------------------------

    def object_fields(self, node: Any, *, top_hint: str) -> tuple[list[FieldDef], TypeExpr | None, bool]:
        """Fields of a tool's input schema, the ``**kwargs`` type, and whether it was usable.

        ``anyOf``/``oneOf`` alternatives are flattened into optional properties: a function has one
        signature, and the server checks which combinations are valid.
        """
        node = self._flatten_root(node, 0)
        if node is True or node == {}:
            return [], None, True
        if not isinstance(node, dict):
            self._warn("the input schema is not an object schema; arguments are passed through unchecked")
            return [], ANY, False
        types = node.get("type")
        if types is not None and types != "object" and not (isinstance(types, list) and "object" in types):
            self._warn(
                f"the input schema has type {types!r}, not 'object'; arguments are passed through unchecked"
            )
            return [], ANY, False
        properties, required = self._collect_properties(node, 0)
        fields = self._fields(properties, required, hint=top_hint, depth=0)
        self.top_notes = untyped_notes(node)
        return fields, self._kwargs_type(node), True

    def result_type(self, node: Any, *, hint: str) -> tuple[TypeExpr, bool]:
        """The Python type of a tool's structured result, and whether MCP's ``result`` wrapper is used."""
        flat = self._resolve_shallow(node, 0)
        if isinstance(flat, dict):
            properties = flat.get("properties")
            required = flat.get("required")
            if (
                isinstance(properties, dict)
                and list(properties) == ["result"]
                and isinstance(required, list)
                and "result" in required
            ):
                return self.type_of(properties["result"], hint=hint, depth=1), True
        return self.type_of(node, hint=hint, depth=0), False

    # --- types ------------------------------------------------------------------------------------

    def type_of(self, node: Any, *, hint: str, depth: int, ref: str | None = None) -> TypeExpr:
        if depth > MAX_DEPTH:
            self._warn(f"schema nesting deeper than {MAX_DEPTH} levels at {self._where()}; typed as Any")
            return ANY
        if node is True or node is False or node is None:
            return ANY
        if not isinstance(node, dict):
            self._warn(
                f"the schema of {self._where()} is a {type(node).__name__}, not an object; typed as Any"
            )
            return ANY
        if "$ref" not in node and isinstance(node.get("$dynamicRef"), str):
            node = {**{k: v for k, v in node.items() if k != "$dynamicRef"}, "$ref": node["$dynamicRef"]}
        if "$ref" in node:
            return self._ref_type(node, hint=hint, depth=depth)
        if isinstance(node.get("allOf"), list) and node["allOf"]:
            return self.type_of(self._merge_all_of(node, depth), hint=hint, depth=depth + 1, ref=ref)
        if "const" in node:
            return LiteralType((node["const"],)) if _scalar(node["const"]) else ANY
        if isinstance(node.get("enum"), list):
            return self._enum_type(node)
        alternatives = node.get("anyOf") if isinstance(node.get("anyOf"), list) else node.get("oneOf")
        if isinstance(alternatives, list) and alternatives:
            return self._union_type(node, alternatives, hint=hint, depth=depth)
        types = self._types(node)
        if types is None:
            return ANY
        members = [self._single_type(node, kind, hint=hint, depth=depth, ref=ref) for kind in types]
        if sum(kind != "null" for kind in types) > 1:  # type: [string, integer]: each its own bounds
            members = [self._constrained({}, member, node, depth) for member in members]
        if node.get("nullable") is True:
            members.append(NONE)
        return union(members)

    def _types(self, node: dict[str, Any]) -> list[str] | None:
        kind = node.get("type")
        if isinstance(kind, str):
            kinds = [kind]
        elif isinstance(kind, list) and kind and all(isinstance(k, str) for k in kind):
            kinds = list(dict.fromkeys(kind))
        elif kind is None:
            if any(
                k in node for k in ("properties", "additionalProperties", "patternProperties", "required")
            ):
                kinds = ["object"]
            elif any(k in node for k in ("items", "prefixItems")):
                kinds = ["array"]
            else:
                return None
        else:
            self._warn(f"unreadable 'type' {kind!r}; typed as Any")
            return None
        if "number" in kinds and "integer" in kinds:
            kinds.remove("integer")
        return kinds

    def _single_type(
        self, node: dict[str, Any], kind: str, *, hint: str, depth: int, ref: str | None
    ) -> TypeExpr:
        if kind == "string" and node.get("format") in FORMATS:
            return Primitive(FORMATS[node["format"]])
        if kind == "string" and node.get("contentEncoding") == "base64":
            return Primitive("base64")
        if kind in _PRIMITIVES:
            return _PRIMITIVES[kind]
        if kind == "object":
            return self._object_type(node, hint=hint, depth=depth, ref=ref)
        if kind == "array":
            return self._array_type(node, hint=hint, depth=depth)
        self._warn(f"unknown type {kind!r} at {self._where()}; typed as Any")
        return ANY

    def _enum_type(self, node: dict[str, Any]) -> TypeExpr:
        values = node["enum"]
        if not values or not all(_scalar(value) for value in values):
            return ANY
        kinds = self._types(node) if "type" in node else None
        if kinds:
            allowed = [v for v in values if any(_json_type_matches(kind, v) for kind in kinds)]
            values = allowed or values
        expr = union([LiteralType(tuple(values))])
        return union([expr, NONE]) if node.get("nullable") is True else expr

    def _union_type(
        self, node: dict[str, Any], alternatives: list[Any], *, hint: str, depth: int
    ) -> TypeExpr:
        base = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        structural_base = any(k in _STRUCTURAL for k in base)
        members: list[TypeExpr] = []
        sources: list[Any] = []
        for index, alternative in enumerate(alternatives):
            if alternative is False:
                continue
            member_hint = hint if len(alternatives) == 1 else f"{hint}{index + 1}"
            if structural_base:
                if isinstance(alternative, dict) and not any(
                    k in _STRUCTURAL - {"required"} for k in alternative
                ):
                    return self.type_of(base, hint=hint, depth=depth + 1)  # alternatives only constrain
                alternative = self._merge([base, self._resolve_shallow(alternative, depth)])
            members.append(self.type_of(alternative, hint=member_hint, depth=depth + 1))
            sources.append(alternative)
        if sum(member != NONE for member in members) > 1:  # one value or null: the field has its bounds
            members = [self._constrained(base, m, s, depth) for m, s in zip(members, sources, strict=True)]
        if node.get("nullable") is True:
            members.append(NONE)
        return union(members) if members else ANY

    def _constrained(self, base: dict[str, Any], member: TypeExpr, source: Any, depth: int) -> TypeExpr:
        """``member`` with the constraints of its alternative (and of the ``anyOf``'s own schema: a
        ``maxLength`` next to ``anyOf`` holds for the string member)."""
        resolved = self._resolve_shallow(source, depth + 1, warn=False)
        if not isinstance(resolved, dict) or not isinstance(member, Primitive | ListType | TupleType):
            return member
        own = {k: v for k, v in base.items() if k not in _STRUCTURAL}
        constraints = _constraints({**own, **resolved}, member)
        return Constrained(member, constraints) if constraints else member

    def _object_type(self, node: dict[str, Any], *, hint: str, depth: int, ref: str | None) -> TypeExpr:
        properties = node.get("properties")
        if not isinstance(properties, dict) or not properties:
            additional = node.get("additionalProperties")
            if isinstance(additional, dict) and additional:
                return DictType(self._bounded(additional, hint=f"{hint}Value", depth=depth + 1))
            return DictType(ANY)
        if ref is not None and ref in self._by_ref:
            return ModelRef(self._by_ref[ref])
        title = node.get("title")
        model = ModelDef(
            hint=class_name(title if isinstance(title, str) and title.strip() else hint, fallback="Model"),
            description=_text(node.get("description")),
        )
        if ref is not None:
            self._by_ref[ref] = model
        self._models.append(model)
        required = node.get("required")
        model.fields = self._fields(properties, required, hint=model.hint, depth=depth)
        additional = node.get("additionalProperties", node.get("unevaluatedProperties"))
        if additional is False and "patternProperties" not in node:
            model.extra = "forbid"
        elif isinstance(additional, dict) and additional:
            model.extra_type = self._bounded(additional, hint=f"{model.hint}Value", depth=depth + 1)
        return ModelRef(model)

    def _array_type(self, node: dict[str, Any], *, hint: str, depth: int) -> TypeExpr:
        prefix = node.get("prefixItems")
        rest = node.get("items")
        if not isinstance(prefix, list) and isinstance(rest, list):  # draft-07 tuple form
            prefix, rest = rest, node.get("additionalItems")
        item_hint = f"{hint}Item"
        if isinstance(prefix, list):
            types = [self._bounded(p, hint=item_hint, depth=depth + 1) for p in prefix]
            closed = rest is False or node.get("maxItems") == len(prefix)
            if closed and node.get("minItems") == len(prefix):
                return TupleType(tuple(types))
            extra = (
                ANY if rest is None or rest is True else self._bounded(rest, hint=item_hint, depth=depth + 1)
            )
            return ListType(union([*types, extra]) if rest is not False else union(types) if types else ANY)
        if isinstance(rest, dict) or rest is True:
            return ListType(self._bounded(rest, hint=item_hint, depth=depth + 1))
        return ListType(ANY)

    def _bounded(self, node: Any, *, hint: str, depth: int) -> TypeExpr:
        """The type of an item or a dict value with its own constraints (``items: {"maxLength": 5}``),
        which no field holds; an optional one (``anyOf: [X, null]``, ``type: [X, "null"]``) keeps
        the constraints of X."""
        expr = self.type_of(node, hint=hint, depth=depth)
        resolved = self._resolve_shallow(node, depth + 1, warn=False)
        if isinstance(resolved, dict):
            source, value = self._nullable_alternative(resolved, expr, depth)
            if value is not expr:
                base = {k: v for k, v in resolved.items() if k not in ("anyOf", "oneOf")}
                return union([self._constrained(base, value, source, depth), NONE])
        return self._constrained({}, expr, node, depth)

    # --- references and merging ------------------------------------------------------------------

    def _ref_type(self, node: dict[str, Any], *, hint: str, depth: int) -> TypeExpr:
        pointer = node["$ref"]
        if not isinstance(pointer, str):
            self._warn(f"a '$ref' at {self._where()} is not a string; typed as Any")
            return ANY
        target = self._resolve(pointer)
        if target is MISSING:
            self._warn(f"'$ref' {pointer!r} at {self._where()} cannot be resolved; typed as Any")
            return ANY
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if any(k in _STRUCTURAL for k in siblings):  # draft 2019+: $ref next to other keywords
            return self.type_of(self._merge([target, siblings]), hint=hint, depth=depth + 1)
        nullable = siblings.get("nullable") is True
        if pointer in self._by_ref:
            expr: TypeExpr = ModelRef(self._by_ref[pointer])
        elif pointer in self._ref_stack:
            expr = ANY  # recursion through a non-object schema: not expressible as a class
        else:
            ref_hint = hint
            if isinstance(target, dict) and not isinstance(target.get("title"), str):
                ref_hint = class_name(unquote(pointer.rsplit("/", 1)[-1]), fallback=hint)
            self._ref_stack.append(pointer)
            try:
                expr = self.type_of(target, hint=ref_hint, depth=depth + 1, ref=pointer)
            finally:
                self._ref_stack.pop()
        return union([expr, NONE]) if nullable else expr

    def _resolve(self, pointer: str) -> Any:
        """The schema a local ``$ref`` points to (``#/$defs/X``, ``#/definitions/X``, any JSON pointer)."""
        if pointer == "#":
            return self._document
        if pointer.startswith("#/"):
            current = self._document
            for raw in pointer[2:].split("/"):
                part = unquote(raw).replace("~1", "/").replace("~0", "~")
                if isinstance(current, dict) and part in current:
                    current = current[part]
                elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
                    current = current[int(part)]
                else:
                    return MISSING
            return current
        if pointer.startswith("#") and "/" not in pointer:
            return self._anchor(unquote(pointer[1:]))
        if isinstance(self._document, dict) and "/" not in pointer and "#" not in pointer:
            for section in ("$defs", "definitions"):  # lenient: a bare definition name
                defs = self._document.get(section)
                if isinstance(defs, dict) and pointer in defs:
                    return defs[pointer]
        return MISSING

    def _anchor(self, name: str) -> Any:
        """The subschema named ``name`` by ``$anchor``/``$dynamicAnchor`` (or draft-07 ``$id: "#name"``)."""
        stack, seen = [self._document], 0
        while stack and seen < 10_000:
            node = stack.pop()
            seen += 1
            if isinstance(node, dict):
                if name in (node.get("$anchor"), node.get("$dynamicAnchor")) or node.get("$id") == f"#{name}":
                    return node
                stack.extend(reversed(list(node.values())))
            elif isinstance(node, list):
                stack.extend(reversed(node))
        return MISSING

    def _resolve_shallow(self, node: Any, depth: int, *, warn: bool = True) -> Any:
        """``node`` with a top-level ``$ref`` and ``allOf`` folded in (for merging)."""
        for _ in range(8):
            if isinstance(node, dict) and isinstance(node.get("$ref"), str):
                target = self._resolve(node["$ref"])
                if target is MISSING:
                    if warn:
                        self._warn(f"'$ref' {node['$ref']!r} at {self._where()} cannot be resolved; ignored")
                    return {k: v for k, v in node.items() if k != "$ref"}
                siblings = {k: v for k, v in node.items() if k != "$ref"}
                node = self._merge([target, siblings]) if siblings else target
            elif isinstance(node, dict) and isinstance(node.get("allOf"), list):
                node = self._merge_all_of(node, depth)
            else:
                return node
        return node

    def _merge_all_of(self, node: dict[str, Any], depth: int) -> Any:
        base = {k: v for k, v in node.items() if k != "allOf"}
        members = [m for m in node["allOf"] if m is not True]
        if any(m is False for m in members):
            return False
        if depth > MAX_DEPTH:
            return {}
        resolved = [self._resolve_shallow(m, depth + 1) for m in members]
        return self._merge([base, *resolved])

    def _merge(self, schemas: list[Any]) -> Any:
        """One schema that demands what all of ``schemas`` demand (as far as codegen cares)."""
        merged: dict[str, Any] = {}
        notes: list[str] = []
        for schema in schemas:
            if schema is False:
                return False
            if not isinstance(schema, dict):
                continue
            notes.extend(note for note in untyped_notes(schema) if note not in notes)
            for key, value in schema.items():
                if key in _UNTYPED or key in ("then", "else", _NOTES):
                    continue
                if key not in merged:
                    merged[key] = value
                elif key == "properties" and isinstance(value, dict) and isinstance(merged[key], dict):
                    properties = dict(merged[key])
                    for name, sub in value.items():
                        properties[name] = {"allOf": [properties[name], sub]} if name in properties else sub
                    merged[key] = properties
                elif key == "required" and isinstance(value, list) and isinstance(merged[key], list):
                    merged[key] = list(dict.fromkeys([*merged[key], *value]))
                elif key == "type":
                    merged[key] = _intersect_types(merged[key], value)
                elif key == "allOf" and isinstance(value, list) and isinstance(merged[key], list):
                    merged[key] = [*merged[key], *value]
                # two anyOf/oneOf: the first one is kept (more permissive is safe: the server decides)
        if notes:
            merged[_NOTES] = notes
        return merged

    def _flatten_root(self, node: Any, depth: int) -> Any:
        node = self._resolve_shallow(node, depth)
        if not isinstance(node, dict):
            return node
        alternatives = node.get("anyOf") if isinstance(node.get("anyOf"), list) else node.get("oneOf")
        if not isinstance(alternatives, list):
            return node
        base = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        properties = dict(base.get("properties") or {}) if isinstance(base.get("properties"), dict) else {}
        for alternative in alternatives:
            alternative = self._resolve_shallow(alternative, depth + 1)
            if isinstance(alternative, dict) and isinstance(alternative.get("properties"), dict):
                for name, sub in alternative["properties"].items():
                    properties.setdefault(name, sub)
        if properties:
            base["properties"] = properties
            base.setdefault("type", "object")
        return base if properties or "type" in base else node

    def _nullable_alternative(
        self, schema: dict[str, Any], expr: TypeExpr, depth: int
    ) -> tuple[Any, TypeExpr]:
        """Where a field's constraints are and the type they hold for: ``schema``, or for
        ``anyOf: [X, {"type": "null"}]`` (an optional value, as pydantic writes it) ``X`` with the
        type of ``X``; for ``type: [X, "null"]`` (or ``nullable``) ``schema`` with the type of X."""
        alternatives = schema.get("anyOf") if isinstance(schema.get("anyOf"), list) else schema.get("oneOf")
        value_type = without_none(expr)
        if value_type is None:
            return schema, expr
        if not isinstance(alternatives, list):  # type: [X, "null"] or nullable: the bounds of X hold
            return schema, value_type
        if "type" in schema:
            return schema, expr
        values = [a for a in alternatives if not (isinstance(a, dict) and a.get("type") == "null")]
        if len(values) != 1:
            return schema, expr
        source = self._resolve_shallow(values[0], depth + 1, warn=False)
        return (source, value_type) if isinstance(source, dict) else (schema, expr)

    # --- objects ---------------------------------------------------------------------------------

    def _collect_properties(self, node: dict[str, Any], depth: int) -> tuple[dict[str, Any], Any]:
        properties = node.get("properties")
        if properties is not None and not isinstance(properties, dict):
            self._warn("'properties' is not an object; ignored")
            properties = None
        return dict(properties or {}), node.get("required")

    def _kwargs_type(self, node: dict[str, Any]) -> TypeExpr | None:
        additional = node.get("additionalProperties")
        if additional is True or additional == {} or (additional is None and "patternProperties" in node):
            return ANY
        if isinstance(additional, dict):
            return self._bounded(additional, hint="Extra", depth=1)
        return None

    def _fields(self, properties: dict[str, Any], required: Any, *, hint: str, depth: int) -> list[FieldDef]:
        required_names = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        fields: list[FieldDef] = []
        for wire, schema in properties.items():
            if schema is False or not isinstance(wire, str):
                continue  # a property that must not be present
            fields.append(self._field(wire, schema, wire in required_names, hint=hint, depth=depth))
        known = set(properties)
        fields.extend(
            FieldDef(wire=name, type=ANY, required=True) for name in required_names if name not in known
        )
        return fields

    def _field(self, wire: str, schema: Any, required: bool, *, hint: str, depth: int) -> FieldDef:
        child_hint = class_name(wire, fallback=f"{hint}Field")
        self._path.append(wire)
        try:
            expr = self.type_of(schema, hint=child_hint, depth=depth + 1)
        finally:
            self._path.pop()
        description = ""
        default: Any = MISSING
        constraints: tuple[tuple[str, int | float | str | bool], ...] = ()
        unchecked: tuple[str, ...] = ()
        if isinstance(schema, dict):
            direct = schema
            merges = "$ref" in schema or "allOf" in schema
            target = self._resolve_shallow(schema, depth + 1, warn=False) if merges else schema
            description = _text(direct.get("description")) or (
                _text(target.get("description"))
                if isinstance(target, dict) and "properties" not in target
                else ""
            )
            if "default" in direct:
                default = direct["default"]
            elif isinstance(target, dict) and "default" in target:
                default = target["default"]
            if default is not MISSING and not (_small_json(default) and fits(expr, default)):
                default = MISSING
            if isinstance(target, dict):
                source, checked = self._nullable_alternative(target, expr, depth)
                constraints = _constraints(source, checked)
                unchecked = _unchecked(source, checked, constraints + _member_constraints(checked))
                if source is not target:  # what the field's own schema adds to the alternative's
                    unchecked += tuple(n for n in untyped_notes(target) if n not in unchecked)
        return FieldDef(
            wire=wire,
            type=expr,
            required=required,
            default=default,
            description=description,
            constraints=constraints,
            unchecked=unchecked,
        )


def _json_type_matches(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    return False


def _intersect_types(first: Any, second: Any) -> Any:
    left = [first] if isinstance(first, str) else first if isinstance(first, list) else None
    right = [second] if isinstance(second, str) else second if isinstance(second, list) else None
    if left is None or right is None:
        return first if right is None else second
    if "number" in left and "integer" in right:
        left = [*left, "integer"]
    if "number" in right and "integer" in left:
        right = [*right, "integer"]
    common = [kind for kind in left if kind in right]
    return common if common else first


def _constraints(schema: dict[str, Any], expr: TypeExpr) -> tuple[tuple[str, int | float | str | bool], ...]:
    """What the kernel can check for ``expr``: bounds, lengths, ``multipleOf``, a ``pattern`` that
    Python's ``re`` reads (searched, as JSON Schema does), ``uniqueItems``."""
    found: list[tuple[str, int | float | str | bool]] = []
    if expr in (Primitive("int"), Primitive("float")):
        step = _bound(schema.get("multipleOf"))
        if step is not None and step > 0:
            found.append(("multiple_of", step))
        for key, name in _NUMBER_CONSTRAINTS.items():
            value = schema.get(key)
            bound = _bound(value)
            if bound is not None:
                found.append((name, bound))
            elif value is True and key.startswith("exclusive"):  # draft-04 boolean form
                bound = _bound(schema.get("minimum" if key == "exclusiveMinimum" else "maximum"))
                if bound is not None:
                    plain = "ge" if key == "exclusiveMinimum" else "le"
                    found = [c for c in found if c[0] != plain]
                    found.append((name, bound))
    if expr in STRINGS:
        found.extend(_length_constraints(schema, _LENGTH_CONSTRAINTS))
        if _python_pattern(schema.get("pattern")):
            found.append(("pattern", schema["pattern"]))
    if isinstance(expr, ListType):
        found.extend(_length_constraints(schema, _ITEMS_CONSTRAINTS))
    if isinstance(expr, ListType | TupleType) and schema.get("uniqueItems") is True:
        found.append(("unique_items", True))
    names = [name for name, _ in found]
    return tuple(c for c in found if names.count(c[0]) == 1 or c[0] in ("gt", "lt"))


def _python_pattern(pattern: Any) -> bool:
    """Whether ``pattern`` reads the same way to Python's ``re`` (checked in the kernel)."""
    if (
        not isinstance(pattern, str)
        or len(pattern) > 2000
        or "(?<" in pattern.replace("(?<=", "").replace("(?<!", "")
    ):
        return False  # (?<name>...) is a named group in ECMA-262, an error in Python before 3.14
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


def _member_constraints(expr: TypeExpr) -> tuple[tuple[str, Any], ...]:
    """The constraints a union's members check themselves (``type: [string, integer]``)."""
    members = expr.members if isinstance(expr, UnionType) else ()
    return tuple(c for member in members if isinstance(member, Constrained) for c in member.constraints)


def _unchecked(
    schema: dict[str, Any], expr: TypeExpr, checked: tuple[tuple[str, Any], ...]
) -> tuple[str, ...]:
    """Constraints of a property that the kernel leaves to the server, for help()."""
    notes: list[str] = []
    names = {name for name, _ in checked}
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and "pattern" not in names:
        notes.append(f"pattern {pattern[:200]!r}")
    if _bound(schema.get("multipleOf")) is not None and "multiple_of" not in names:
        notes.append(f"multiple of {schema['multipleOf']!r}")
    if isinstance(schema.get("format"), str) and not _typed_format(expr):
        notes.append(f"format {schema['format'][:60]!r}")
    if schema.get("uniqueItems") is True and "unique_items" not in names:
        notes.append("unique items")
    positional = schema.get("prefixItems", schema.get("items"))
    if isinstance(positional, list) and not isinstance(expr, TupleType):
        notes.append("item types by position")
    if isinstance(schema.get("patternProperties"), dict):
        keys = ", ".join(repr(k[:60]) for k in list(schema["patternProperties"])[:3])
        notes.append(f"keys matching {keys}")
    notes.extend(untyped_notes(schema))
    return tuple(notes)


def untyped_notes(schema: Any) -> tuple[str, ...]:
    """What ``schema`` demands that no Python type expresses (``if``/``then``/``else``, ``not``,
    ``dependentRequired``...), each as ``keyword <compact JSON>`` (cut at 200 characters)."""
    if not isinstance(schema, dict):
        return ()
    notes = [n for n in schema.get(_NOTES, ()) if isinstance(n, str)]
    for key in _UNTYPED:
        if key not in schema:
            continue
        if key == "if":
            parts = [f"{k} {_compact(schema[k])}" for k in ("if", "then", "else") if k in schema]
            text = " ".join(parts)
        else:
            text = f"{key} {_compact(schema[key])}"
        if text not in notes:
            notes.append(text if len(text) <= 200 else text[:199] + "…")
    return tuple(notes)


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)[:200]
    except (TypeError, ValueError, RecursionError):
        return "(unreadable)"


def _typed_format(expr: TypeExpr) -> bool:
    """Whether ``expr`` (or a member of it) is a string format's Python type, checked in the kernel."""
    members = expr.members if isinstance(expr, UnionType) else (expr,)
    return any(isinstance(m, Primitive) and m.name in FORMATS.values() for m in members)


def _length_constraints(schema: dict[str, Any], keys: dict[str, str]) -> list[tuple[str, int]]:
    return [
        (name, schema[key])
        for key, name in keys.items()
        if isinstance(schema.get(key), int) and not isinstance(schema.get(key), bool) and schema[key] >= 0
    ]


def tool_shape(
    input_schema: Any, output_schema: Any, *, function: str, description: str, warn: Warn
) -> ToolShape:
    """Convert one tool's schemas (input and, when given, output)."""
    models: list[ModelDef] = []
    hint = class_name(function, fallback="Tool")
    converter = SchemaConverter(input_schema, warn=warn, models=models)
    params, extra, _ = converter.object_fields(input_schema, top_hint=hint)
    result: TypeExpr | None = None
    unwrap = False
    if output_schema is not None:
        output = SchemaConverter(output_schema, warn=warn, models=models)
        result, unwrap = output.result_type(output_schema, hint=f"{hint}Result")
    return ToolShape(
        params=params,
        extra_kwargs=extra,
        result=result,
        unwrap=unwrap,
        models=models,
        description=description,
        unchecked=converter.top_notes,
    )


def degraded_shape(input_schema: Any, output_schema: Any, *, description: str) -> ToolShape:
    """A shape that cannot fail: property names kept, every type ``Any``."""
    params: list[FieldDef] = []
    properties = input_schema.get("properties") if isinstance(input_schema, dict) else None
    required = input_schema.get("required") if isinstance(input_schema, dict) else None
    required_names = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    if isinstance(properties, dict):
        params = [
            FieldDef(wire=name, type=ANY, required=name in required_names)
            for name in properties
            if isinstance(name, str)
        ]
    return ToolShape(
        params=params,
        extra_kwargs=ANY if not params else None,
        result=None if output_schema is None else ANY,
        unwrap=False,
        models=[],
        description=description,
    )
