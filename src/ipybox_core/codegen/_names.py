"""Python names for wire names: server modules, functions, keyword arguments, model classes and fields.

Every name is a valid identifier in its NFKC form (the form Python itself uses), never a keyword,
and unique in its scope; the wire name stays available as the alias sent to the server.
"""

from __future__ import annotations

import builtins
import hashlib
import keyword
import re
import unicodedata
from collections.abc import Iterable

KEYWORDS = frozenset(keyword.kwlist)
BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_"))
IPYTHON_NAMES = frozenset({"display", "get_ipython", "In", "Out", "exit", "quit"})

TYPING_NAMES = frozenset({"Annotated", "Any", "Literal", "Field", "annotations"})
"""Names the generated modules import or use in annotations."""

MODULE_PRIVATE = frozenset({"_base", "_Args", "_tools"})
"""Module-level names of the generated code that tools and models must not take."""

BASEMODEL_ATTRIBUTES = frozenset(
    {
        "construct",
        "copy",
        "dict",
        "fields",
        "from_orm",
        "json",
        "model_computed_fields",
        "model_config",
        "model_construct",
        "model_copy",
        "model_dump",
        "model_dump_json",
        "model_extra",
        "model_fields",
        "model_fields_set",
        "model_json_schema",
        "model_parametrized_name",
        "model_post_init",
        "model_rebuild",
        "model_validate",
        "model_validate_json",
        "model_validate_strings",
        "parse_file",
        "parse_obj",
        "parse_raw",
        "schema",
        "schema_json",
        "update_forward_refs",
        "validate",
    }
)
"""Attributes of pydantic's ``BaseModel`` that a field must not shadow."""

ANNOTATION_BUILTINS = frozenset({"str", "int", "float", "bool", "list", "dict", "tuple", "None"})
"""Builtins that appear in generated annotations (a field of that name would shadow them)."""

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def identifier(raw: str, *, fallback: str) -> str:
    """``raw`` as a valid identifier: NFKC form, invalid characters as ``_``, ``_`` before a digit.

    Runs of replaced characters become one ``_``; replaced characters at either end are dropped.
    An empty result becomes ``fallback``.
    """
    text = unicodedata.normalize("NFKC", raw)
    parts: list[str] = []
    pending = False  # an invalid character was seen since the last valid one
    for char in text:
        valid = char.isidentifier() if not parts else ("a" + char).isidentifier()
        if valid:
            if pending and parts:
                parts.append("_")
            parts.append(char)
            pending = False
        elif char.isdigit() or ("a" + char).isidentifier():
            # a valid continuation character at the start (a digit): keep it after an underscore
            parts.extend(("_", char))
            pending = False
        else:
            pending = True
    name = "".join(parts) or fallback
    name = unicodedata.normalize("NFKC", name)
    if not name.isidentifier():  # exotic normalisation effects: fall back to ASCII
        name = re.sub(r"\W", "_", name.encode("ascii", "replace").decode()) or fallback
        if name[0].isdigit():
            name = "_" + name
    return name


def kwarg_name(raw: str) -> str:
    """A keyword-argument name for a property (``from`` → ``from_``, ``2fa`` → ``_2fa``)."""
    name = identifier(raw, fallback="unnamed")
    return name + "_" if name in KEYWORDS else name


def attribute_name(raw: str, reserved: frozenset[str]) -> str:
    """A pydantic field name: no leading underscore (``_id`` → ``id_``, ``2fa`` → ``field_2fa``)."""
    name = identifier(raw, fallback="field")
    stripped = name.lstrip("_")
    if stripped and stripped[0].isidentifier():
        name = stripped + "_" * (len(name) - len(stripped))
    elif stripped:  # starts with a digit or another character only valid inside a name
        name = "field_" + stripped
    else:
        name = "field"
    if name in KEYWORDS or name in reserved or name in BASEMODEL_ATTRIBUTES:
        name += "_"
    return name


def _public_identifier(raw: str, *, fallback: str, avoid: frozenset[str]) -> str:
    """An identifier without a leading ``__`` (no dunder look-alikes), ``_`` appended if in ``avoid``."""
    name = identifier(raw, fallback=fallback)
    if name.startswith("__"):
        name = "_" + name.lstrip("_") if name.lstrip("_") else fallback
    return name + "_" if name in avoid else name


_FUNCTION_AVOID = KEYWORDS | BUILTINS | IPYTHON_NAMES | TYPING_NAMES


def function_name(raw: str) -> str:
    """A function name for a tool: never a keyword, builtin or IPython name (``list`` → ``list_``)."""
    return _public_identifier(raw, fallback="tool", avoid=_FUNCTION_AVOID)


def module_name(raw: str) -> str:
    """The Python package name for a server name (``my-server`` → ``my_server``)."""
    return _public_identifier(raw, fallback="server", avoid=KEYWORDS)


def class_name(raw: str, *, fallback: str) -> str:
    """A PascalCase class name (``order summary`` → ``OrderSummary``)."""
    words = [word for chunk in _CAMEL_BOUNDARY.split(raw) for word in re.split(r"[\W_]+", chunk) if word]
    name = "".join(word[:1].upper() + word[1:] for word in words)
    name = identifier(name, fallback=fallback) if name else fallback
    name = name.lstrip("_") or fallback
    if not name[0].isidentifier():
        name = fallback + name
    if name in KEYWORDS or name in BUILTINS or name in TYPING_NAMES or name in IPYTHON_NAMES:
        name += "Model"
    return name


def file_module_name(function: str) -> str:
    """An ASCII, lower-case module file name for a function (safe on case-insensitive disks)."""
    if function.isascii():
        return function.lower()
    digest = hashlib.sha256(function.encode()).hexdigest()[:12]
    return f"u_{digest}"


class NameScope:
    """Hands out unique names in one namespace; clashes get ``_2``, ``_3``, ... (or ``2``, ``3``)."""

    def __init__(self, reserved: Iterable[str] = (), *, casefold: bool = False) -> None:
        self._casefold = casefold
        # a frozenset is shared as is (scopes are created per model: no copying of big sets)
        self._reserved = (
            reserved
            if isinstance(reserved, frozenset) and not casefold
            else frozenset(self._key(name) for name in reserved)
        )
        self._taken: set[str] = set()

    def _key(self, name: str) -> str:
        return name.casefold() if self._casefold else name

    def taken(self, name: str) -> bool:
        key = self._key(name)
        return key in self._taken or key in self._reserved

    def reserve(self, name: str) -> None:
        self._taken.add(self._key(name))

    def claim(self, candidate: str, *, separator: str = "_") -> str:
        """``candidate`` or the first free numbered variant of it; the result is now taken."""
        name = candidate
        number = 2
        while self.taken(name):
            name = f"{candidate}{separator}{number}"
            number += 1
        self._taken.add(self._key(name))
        return name
