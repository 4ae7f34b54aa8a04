"""The intermediate form between JSON Schema and Python source: types, models, fields, tool shapes.

Types are small immutable trees; models are mutable only while names are assigned. Rendering a
type gives its Python annotation, either complete (for the generated code) or compact (for
signatures shown to people and models).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

JsonScalar: TypeAlias = str | int | float | bool | None

MAX_SHOWN_LITERAL_CHARS = 320
"""A compact ``Literal[...]`` shows values up to this many characters, then ``... and N more``."""


@dataclass(frozen=True)
class AnyType:
    pass


@dataclass(frozen=True)
class Primitive:
    """A JSON scalar, or a string ``format`` with a Python type (``datetime``, ``date``, ``UUID``)."""

    name: Literal["str", "int", "float", "bool", "None", "datetime", "date", "UUID", "base64"]
    """``base64``: a string with ``contentEncoding: base64`` (shown as ``str``)."""


CODE_NAMES = {
    "str": "_base.String",
    "base64": "_base.Base64Text",
    "int": "_base.Integer",
    "float": "_base.Number",
    "bool": "_base.Bool",
    "datetime": "_base.DateTime",
    "date": "_base.Date",
    "UUID": "_base.Uuid",
}
"""A primitive's annotation in generated code: the strict types of the package's ``_base``
(shown as the plain name in signatures and help)."""
SHOWN_NAMES = {"base64": "str"}
"""A primitive's name in signatures and help where it is not its own."""
PrimitiveName: TypeAlias = Literal[
    "str", "int", "float", "bool", "None", "datetime", "date", "UUID", "base64"
]
STRINGS = (Primitive("str"), Primitive("base64"))
"""The primitives that take string constraints (``maxLength``, ``pattern``)."""
FORMATS: dict[str, PrimitiveName] = {"date-time": "datetime", "date": "date", "uuid": "UUID"}
"""String formats with a Python type: values are checked in the kernel and sent in the JSON form."""


@dataclass(frozen=True)
class LiteralType:
    values: tuple[JsonScalar, ...]


@dataclass(frozen=True)
class ListType:
    item: TypeExpr


@dataclass(frozen=True)
class TupleType:
    items: tuple[TypeExpr, ...]


@dataclass(frozen=True)
class DictType:
    value: TypeExpr


@dataclass(frozen=True)
class UnionType:
    members: tuple[TypeExpr, ...]


@dataclass(frozen=True, eq=False)
class ModelRef:
    model: ModelDef


Constraint: TypeAlias = tuple[str, int | float | str | bool]
"""A check the kernel makes: a pydantic ``Field`` argument, or ``("unique_items", True)``."""


@dataclass(frozen=True)
class Constrained:
    """A union member with its own constraints (``anyOf: [{"type": "string", "maxLength": 5},
    {"type": "integer", "minimum": 0}]``); a field's own constraints stay on :class:`FieldDef`."""

    base: TypeExpr
    constraints: tuple[Constraint, ...]


TypeExpr: TypeAlias = (
    AnyType | Primitive | LiteralType | ListType | TupleType | DictType | UnionType | ModelRef | Constrained
)

ANY = AnyType()
NONE = Primitive("None")

MISSING: Any = object()
"""Marks a field without a usable default."""


@dataclass(eq=False)
class FieldDef:
    """One property of an object schema (a model field, or a tool's keyword argument)."""

    wire: str
    type: TypeExpr
    required: bool
    default: Any = MISSING
    """A default that fits ``type`` (unfit defaults are dropped while converting)."""
    description: str = ""
    constraints: tuple[Constraint, ...] = ()
    """Checked in the kernel: pydantic ``Field`` arguments, and ``("unique_items", True)``."""
    unchecked: tuple[str, ...] = ()
    """Schema constraints the kernel does not check (shown in help), e.g. ``format 'uri'``."""
    attr: str = ""
    kwarg: str = ""

    @property
    def nullable(self) -> bool:
        """Whether ``None`` is a value the schema accepts (then an explicit ``None`` is sent)."""
        return allows_none(self.type)

    @property
    def python_required(self) -> bool:
        """A Python argument without default (required on the wire and no default to fall back on)."""
        return self.required and self.default is MISSING

    @property
    def always_sent(self) -> bool:
        """Required on the wire but defaulted in Python: the default is sent when not given."""
        return self.required and self.default is not MISSING


@dataclass(eq=False)
class ModelDef:
    """A pydantic model class to generate for an object schema."""

    hint: str
    description: str = ""
    fields: list[FieldDef] = field(default_factory=list)
    extra: Literal["allow", "forbid"] = "allow"
    extra_type: TypeExpr | None = None
    """Type of additional properties when the schema gives one."""
    name: str = ""


@dataclass(eq=False)
class ToolShape:
    """Everything generated for one tool, before names are assigned."""

    params: list[FieldDef]
    extra_kwargs: TypeExpr | None
    """Type of ``**kwargs`` when the input schema allows further properties."""
    result: TypeExpr | None
    """Type of the structured result; ``None`` when the tool has no output schema (text result)."""
    unwrap: bool
    """The output schema is MCP's ``{"result": ...}`` wrapper around a non-object value."""
    models: list[ModelDef]
    description: str = ""
    unchecked: tuple[str, ...] = ()
    """What the input schema's top level demands that no Python type expresses (checked by the server)."""
    notes: tuple[str, ...] = ()
    """What could not be expressed (those parts are typed ``Any``); shown in the function's docstring."""


def allows_none(expr: TypeExpr) -> bool:
    if isinstance(expr, Constrained):
        return allows_none(expr.base)
    if isinstance(expr, AnyType):
        return True
    if isinstance(expr, Primitive):
        return expr.name == "None"
    if isinstance(expr, LiteralType):
        return None in expr.values
    if isinstance(expr, UnionType):
        return any(allows_none(member) for member in expr.members)
    return False


def _literal_key(value: JsonScalar) -> tuple[str, JsonScalar]:
    return (type(value).__name__, value)


def _member_key(expr: TypeExpr) -> object:
    if isinstance(expr, ModelRef):
        return ("model", id(expr.model))
    if isinstance(expr, LiteralType):
        return ("literal", tuple(_literal_key(v) for v in expr.values))
    if isinstance(expr, ListType | TupleType | DictType | UnionType | Constrained):
        return (type(expr).__name__, repr(render(expr, compact=False, names=_identity_names, code=True)))
    return expr


def _identity_names(model: ModelDef) -> str:
    return f"<{id(model)}>"


def union(members: list[TypeExpr]) -> TypeExpr:
    """The union of ``members``: flattened, deduplicated, literals merged, ``Any`` absorbing all."""
    flat: list[TypeExpr] = []
    for member in members:
        flat.extend(member.members if isinstance(member, UnionType) else [member])
    if not flat or any(isinstance(member, AnyType) for member in flat):
        return ANY
    literal_values: list[JsonScalar] = []
    seen_literals: set[tuple[str, JsonScalar]] = set()
    others: list[TypeExpr] = []
    seen: set[object] = set()
    has_none = False
    for member in flat:
        if member == NONE:
            has_none = True
        elif isinstance(member, LiteralType):
            for value in member.values:
                if value is None:
                    has_none = True
                elif _literal_key(value) not in seen_literals:
                    seen_literals.add(_literal_key(value))
                    literal_values.append(value)
        else:
            key = _member_key(member)
            if key not in seen:
                seen.add(key)
                others.append(member)
    result: list[TypeExpr] = []
    if literal_values:
        result.append(LiteralType(tuple(literal_values)))
    result.extend(others)
    if has_none:
        result.append(NONE)
    if len(result) == 1:
        return result[0]
    return UnionType(tuple(result))


def without_none(expr: TypeExpr) -> TypeExpr | None:
    """``expr`` without ``None`` when one type is left (``float`` for ``float | None``), else ``None``."""
    if isinstance(expr, UnionType):
        members = [m for m in expr.members if m != NONE]
        return members[0] if len(members) == 1 else None
    return expr


def optional(expr: TypeExpr) -> TypeExpr:
    return union([expr, NONE])


def py_literal(value: Any) -> str:
    """Python source for a JSON value (``repr`` with non-finite floats spelled out)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _within_budget(values: list[str]) -> list[str]:
    """Every value while they fit :data:`MAX_SHOWN_LITERAL_CHARS`, then how many are left out."""
    shown: list[str] = []
    used = 0
    for value in values:
        used += len(value) + 2
        if used > MAX_SHOWN_LITERAL_CHARS and len(shown) < len(values):
            return [*shown, f"... and {len(values) - len(shown)} more"]
        shown.append(value)
    return shown


def render(expr: TypeExpr, *, compact: bool, names: Any = None, code: bool = False) -> str:
    """The Python annotation for ``expr``; ``compact`` shows a long literal list up to a budget,
    then ``... and N more`` (the full list is in the generated code and in ``help()``); ``code``:
    the annotation for the generated module (strict ``_base`` types, see :data:`CODE_NAMES`)."""
    name_of = names or (lambda model: model.name)

    def inner(item: TypeExpr) -> str:
        return render(item, compact=compact, names=names, code=code)

    if isinstance(expr, Constrained):  # the constraints are code only (help() names them in words)
        return constrained_code(expr, inner(expr.base)) if code else inner(expr.base)
    if isinstance(expr, AnyType):
        return "Any"
    if isinstance(expr, Primitive):
        return CODE_NAMES.get(expr.name, expr.name) if code else SHOWN_NAMES.get(expr.name, expr.name)
    if isinstance(expr, LiteralType):
        values = [py_literal(value) for value in expr.values]
        text = f"Literal[{', '.join(_within_budget(values) if compact else values)}]"
        return f"Annotated[{text}, _base.exact]" if code and _mixes_bool(expr) else text
    if isinstance(expr, ListType):
        return f"list[{inner(expr.item)}]"
    if isinstance(expr, TupleType):
        if not expr.items:
            return "tuple[()]"
        return f"tuple[{', '.join(inner(item) for item in expr.items)}]"
    if isinstance(expr, DictType):
        return f"dict[str, {inner(expr.value)}]"
    if isinstance(expr, UnionType):
        return " | ".join(inner(member) for member in expr.members)
    return str(name_of(expr.model))


UNIQUE = "unique_items"


CHECKED_INSIDE = {"float": "_base.number", "str": "_base.string", "base64": "_base.base64_text"}
"""Primitives whose constraints go inside the type, ``_base.number(ge=0)``: a number's bounds are
checked as a float (an int stays an int); a string's as pydantic checks a str, before bytes are
refused (with ``Field`` outside, pydantic would say ``at most 5 items`` of a string)."""


def checked_inside(expr: TypeExpr, checks: list[str]) -> str | None:
    """``_base.string(max_length=5)`` for a primitive of :data:`CHECKED_INSIDE` with ``checks``."""
    if not checks or not isinstance(expr, Primitive) or expr.name not in CHECKED_INSIDE:
        return None
    return f"{CHECKED_INSIDE[expr.name]}({', '.join(checks)})"


def constrained_code(expr: Constrained, base: str) -> str:
    """``Annotated[<base>, Field(min_length=1)]``; a number's or string's bounds as
    ``_base.number(ge=0)`` (see :data:`CHECKED_INSIDE`), ``uniqueItems`` as ``_base.unique_items``."""
    checks = [f"{name}={py_literal(value)}" for name, value in expr.constraints if name != UNIQUE]
    unique = any(name == UNIQUE for name, _ in expr.constraints)
    inside = checked_inside(expr.base, checks)
    if inside is not None:
        base, checks = inside, []
    extras = ([f"Field({', '.join(checks)})"] if checks else []) + (["_base.unique_items"] if unique else [])
    return f"Annotated[{', '.join([base, *extras])}]" if extras else base


def uses_field(expr: TypeExpr) -> bool:
    """Whether the code annotation of ``expr`` calls pydantic's ``Field``."""
    if isinstance(expr, Constrained):
        return "Field(" in constrained_code(expr, "") or uses_field(expr.base)
    return any(uses_field(member) for member in _parts(expr))


def _parts(expr: TypeExpr) -> tuple[TypeExpr, ...]:
    if isinstance(expr, ListType):
        return (expr.item,)
    if isinstance(expr, DictType):
        return (expr.value,)
    if isinstance(expr, TupleType):
        return expr.items
    if isinstance(expr, UnionType):
        return expr.members
    if isinstance(expr, Constrained):
        return (expr.base,)
    return ()


def _mixes_bool(expr: LiteralType) -> bool:
    """Whether pydantic could take a bool for a number of ``expr`` or a number for a bool."""
    return any(isinstance(v, int | float) for v in expr.values)


def referenced_models(expr: TypeExpr) -> Iterator[ModelDef]:
    """Models directly referenced by ``expr`` (not those referenced by their fields)."""
    if isinstance(expr, ModelRef):
        yield expr.model
    elif isinstance(expr, Constrained):
        yield from referenced_models(expr.base)
    elif isinstance(expr, ListType):
        yield from referenced_models(expr.item)
    elif isinstance(expr, DictType):
        yield from referenced_models(expr.value)
    elif isinstance(expr, TupleType | UnionType):
        for member in expr.items if isinstance(expr, TupleType) else expr.members:
            yield from referenced_models(member)


def uses_name(expr: TypeExpr, name: Literal["Any", "Literal", "Annotated"]) -> bool:
    """Whether the code annotation of ``expr`` uses ``typing.<name>``."""
    if isinstance(expr, AnyType):
        return name == "Any"
    if isinstance(expr, Constrained):
        code = constrained_code(expr, "")
        return (name == "Annotated" and code.startswith("Annotated[")) or uses_name(expr.base, name)
    if isinstance(expr, LiteralType):
        return name == "Literal" or (name == "Annotated" and _mixes_bool(expr))
    if isinstance(expr, ListType):
        return uses_name(expr.item, name)
    if isinstance(expr, DictType):
        return uses_name(expr.value, name)
    if isinstance(expr, TupleType | UnionType):
        return any(uses_name(m, name) for m in (expr.items if isinstance(expr, TupleType) else expr.members))
    return False


def fits(expr: TypeExpr, value: Any, depth: int = 0) -> bool:
    """Whether a JSON ``value`` (a schema default) is valid for ``expr`` (structure only)."""
    if depth > 20:
        return True
    if isinstance(expr, AnyType):
        return True
    if isinstance(expr, Constrained):
        return fits(expr.base, value, depth)
    if isinstance(expr, Primitive):
        if expr.name == "None":
            return value is None
        if expr.name == "bool":
            return isinstance(value, bool)
        if expr.name in ("str", "base64", "datetime", "date", "UUID"):
            return isinstance(value, str)
        if expr.name == "int":
            return (isinstance(value, int) and not isinstance(value, bool)) or (
                isinstance(value, float) and value.is_integer()
            )
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(expr, LiteralType):
        return any(type(value) is type(v) and value == v for v in expr.values)
    if isinstance(expr, ListType):
        return isinstance(value, list) and all(fits(expr.item, item, depth + 1) for item in value)
    if isinstance(expr, TupleType):
        return (
            isinstance(value, list)
            and len(value) == len(expr.items)
            and all(fits(t, v, depth + 1) for t, v in zip(expr.items, value, strict=True))
        )
    if isinstance(expr, DictType):
        return isinstance(value, dict) and all(fits(expr.value, v, depth + 1) for v in value.values())
    if isinstance(expr, UnionType):
        return any(fits(member, value, depth) for member in expr.members)
    if not isinstance(value, dict):
        return False
    model = expr.model
    known = {f.wire: f for f in model.fields}
    if any(f.python_required and f.wire not in value for f in model.fields):
        return False
    if model.extra == "forbid" and any(key not in known for key in value):
        return False
    return all(fits(known[key].type, item, depth + 1) for key, item in value.items() if key in known)
