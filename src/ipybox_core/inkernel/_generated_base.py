"""Support code of a generated MCP tool package (copied into it as ``_base.py``; runs in the kernel).

Imports only the standard library, pydantic and :mod:`ipybox_core.inkernel.runtime` (the one
kernel-side module allowed pydantic: generated models need it). Each generated tool
module defines its argument model and a documented stub function; :func:`tool` turns the stub
into the callable that validates the arguments, sends the call and converts the result.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as _dt
import functools
import inspect
import json
import math
import numbers
import operator
import re
import sys
import uuid
import warnings
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    SerializationInfo,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WrapValidator,
)
from pydantic_core import to_jsonable_python

from ipybox_core.inkernel import runtime

__all__ = [
    "Args",
    "Base64Text",
    "Bool",
    "Date",
    "DateTime",
    "Integer",
    "Model",
    "Number",
    "ResultValidationWarning",
    "String",
    "Uuid",
    "base64_text",
    "exact",
    "is_none",
    "number",
    "string",
    "tool",
    "unique_items",
]

ARGUMENTS = {"ipybox": "arguments"}
"""Validation context of a tool's arguments: formats are checked strictly there, leniently in results."""


class _ModelType(type(BaseModel)):  # type: ignore[misc]
    """``help(Model)`` shows the model's docstring (its fields), not pydantic's methods: pydoc
    documents what ``dir(Model)`` lists, and that is the fields (``dir(model)`` is unchanged)."""

    def __dir__(cls) -> list[str]:
        return list(cls.model_fields)


class Model(BaseModel, metaclass=_ModelType):
    """Base of the generated models: fields by Python name or wire name, unknown keys kept."""

    model_config = ConfigDict(
        extra="allow",
        validate_by_name=True,
        validate_by_alias=True,
        from_attributes=True,
        protected_namespaces=(),
        regex_engine="python-re",
        defer_build=True,
    )

    def __str__(self) -> str:
        """The model as indented JSON (``print(model)``); ``model.model_dump()`` is a dict."""
        data = self.model_dump(mode="json", warnings=False)
        return json.dumps(data, indent=2, ensure_ascii=False, default=str)

    def __getitem__(self, key: str) -> Any:
        """``model["key"]``: a field by Python name or by its name in the JSON, or an extra key."""
        name = self._field_name(key)
        if name is not None:
            return getattr(self, name)
        extra = self.__pydantic_extra__ or {}
        if isinstance(key, str) and key in extra:
            return extra[key]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        """``"key" in model``: whether ``model["key"]`` has a value."""
        return isinstance(key, str) and (
            self._field_name(key) is not None or key in (self.__pydantic_extra__ or {})
        )

    @classmethod
    def _field_name(cls, key: object) -> str | None:
        fields = cls.model_fields
        if key in fields:
            return str(key)
        return next((name for name, info in fields.items() if info.alias == key), None)


class Args(BaseModel):
    """Base of a tool's argument model: fields by keyword-argument name only, nothing unknown."""

    model_config = ConfigDict(
        extra="forbid",
        validate_by_name=False,
        validate_by_alias=True,
        protected_namespaces=(),
        regex_engine="python-re",
        defer_build=True,
    )


class ResultValidationWarning(UserWarning):
    """A tool's structured result did not match its output schema; the data is returned unvalidated."""


def is_none(value: object) -> bool:
    """``exclude_if`` predicate: an explicit ``None`` for a non-nullable property is not sent."""
    return value is None


def _check_unique(value: Any) -> Any:
    if isinstance(value, list | tuple):
        seen: set[str] = set()
        for item in value:
            key = json.dumps(to_jsonable_python(item, by_alias=True), sort_keys=True, default=str)
            if key in seen:
                raise ValueError(f"items must be unique; {key[:80]} occurs more than once")
            seen.add(key)
    return value


unique_items = AfterValidator(_check_unique)
"""``Annotated[list[...], unique_items]``: JSON Schema's ``uniqueItems``."""


# --- JSON types: what the schema allows, sent as the schema says ------------------------------------


def _json_number(value: Any, info: SerializationInfo) -> Any:
    """In arguments, an integral float as a JSON integer (``3.0`` is sent as ``3``); a result
    prints as the server sent it."""
    if info.context == ARGUMENTS and isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def _no_bool(value: Any, expected: str) -> None:
    if isinstance(value, bool):
        raise ValueError(f"expected {expected}, not the bool {value!r}")
    if isinstance(value, str):
        raise ValueError(f"expected {expected}, not the string {value!r} (convert it first)")


def _integer(value: Any) -> Any:
    _no_bool(value, "an integer")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, int | float) and hasattr(type(value), "__index__"):
        return operator.index(value)  # numpy integers and the like
    return value


def _number(value: Any, handler: Callable[[Any], Any]) -> Any:
    _no_bool(value, "a number")
    if not isinstance(value, int | float) and hasattr(type(value), "__index__"):
        value = operator.index(value)
    if isinstance(value, int):
        # bounds and multiples, checked as a float (beyond the largest float: as the largest float)
        handler(value if abs(value) <= _LARGEST_FLOAT else (1 if value > 0 else -1) * sys.float_info.max)
        return value  # an int stays an int (sent exactly)
    if isinstance(value, numbers.Real) and not isinstance(value, float):
        value = float(value)  # numpy floats, fractions
    return handler(value)


_LARGEST_FLOAT = int(sys.float_info.max)

_AS_JSON_NUMBER = PlainSerializer(_json_number, return_type=Any, when_used="json")

Integer = Annotated[int, Strict(), BeforeValidator(_integer), _AS_JSON_NUMBER]
"""JSON Schema ``integer``: an int (an integral float such as ``3.0`` is taken as ``3``); no bool, no str."""
Number = Annotated[float, Strict(), WrapValidator(_number), _AS_JSON_NUMBER]
"""JSON Schema ``number``: an int stays an int, a float a float; integral floats are sent as integers."""


def number(**constraints: Any) -> Any:
    """:data:`Number` with bounds or ``multiple_of`` (checked as pydantic checks a float)."""
    return Annotated[float, Strict(), Field(**constraints), WrapValidator(_number), _AS_JSON_NUMBER]


Bool = Annotated[bool, Strict()]
"""JSON Schema ``boolean``: ``True`` or ``False`` only (no ``1``, no ``'yes'``)."""


def _no_bytes(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        raise ValueError(
            f"expected a string, not {type(value).__name__}: pass value.decode() for text "
            "(binary data goes as the tool describes, often base64.b64encode(value).decode())"
        )
    return value


def _base64_text(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        try:
            base64.b64decode(value, validate=True)
            return bytes(value).decode("ascii")
        except (binascii.Error, ValueError):
            raise ValueError(
                "expected base64 text; these bytes are not base64: pass base64.b64encode(data)"
            ) from None
    return value


String = Annotated[str, BeforeValidator(_no_bytes)]
"""JSON Schema ``string``: a str (a str subclass such as a str Enum too); bytes are refused, not
decoded as UTF-8 (pydantic's lax default), so ``b'...'`` never reaches a server as text by accident."""
Base64Text = Annotated[str, BeforeValidator(_base64_text)]
"""A ``string`` with ``contentEncoding: base64``: a str, or bytes that are base64 text (what
``base64.b64encode(data)`` returns, sent as that text); other bytes are refused (raw data is not
encoded silently: ``b64encode`` output would be encoded twice)."""


def string(**constraints: Any) -> Any:
    """:data:`String` with ``min_length``, ``max_length`` or ``pattern`` (checked as for a str)."""
    return Annotated[str, Field(**constraints), BeforeValidator(_no_bytes)]


def base64_text(**constraints: Any) -> Any:
    """:data:`Base64Text` with ``min_length``, ``max_length`` or ``pattern``."""
    return Annotated[str, Field(**constraints), BeforeValidator(_base64_text)]


def _exact_literal(value: Any, handler: Callable[[Any], Any]) -> Any:
    result = handler(value)
    if isinstance(result, bool) != isinstance(value, bool):
        raise ValueError(f"{value!r} is not one of the allowed values")
    return result


exact = WrapValidator(_exact_literal)
"""``Annotated[Literal[...], exact]``: ``True`` is not ``1`` (nor ``1`` ``True``)."""

_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?P<fraction>\.\d+)?(?P<offset>[Zz]|[+-]\d{2}:\d{2})?"
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DATE_TIME_FIX = (
    "an ISO 8601 string with a UTC offset such as '2026-12-03T14:00:00Z', or a datetime with tzinfo "
    "(datetime(..., tzinfo=timezone.utc))"
)


def _in_arguments(info: ValidationInfo) -> bool:
    return info.context == ARGUMENTS


def _parse_date_time(text: str) -> _dt.datetime:
    match = _DATE_TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a date-time: expected {_DATE_TIME_FIX}")
    fraction = (match["fraction"] or ".")[1:7].ljust(6, "0")
    offset = match["offset"] or ""
    normal = f"{text[:10]}T{text[11:19]}.{fraction}" + ("+00:00" if offset in ("Z", "z") else offset)
    try:
        return _dt.datetime.fromisoformat(normal)
    except ValueError as error:
        raise ValueError(f"{text!r} is not a date-time ({error})") from None


def _date_time(value: Any, info: ValidationInfo) -> Any:
    strict = _in_arguments(info)
    if isinstance(value, str):
        try:
            value = _parse_date_time(value)
        except ValueError:
            if strict:
                raise
            return value  # a result the server wrote otherwise: kept as text
    if not isinstance(value, _dt.datetime):
        raise ValueError(f"expected a date-time: {_DATE_TIME_FIX}; got {type(value).__name__}")
    if strict and value.utcoffset() is None:
        raise ValueError(f"a date-time needs a UTC offset (RFC 3339): use {_DATE_TIME_FIX}")
    return value


def _date(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str):
        try:
            if _DATE.fullmatch(value) is None:
                raise ValueError
            return _dt.date.fromisoformat(value)
        except ValueError:
            if _in_arguments(info):
                raise ValueError(f"{value!r} is not a date: expected 'YYYY-MM-DD' or a date object") from None
            return value
    if isinstance(value, _dt.datetime):
        raise ValueError("expected a date, not a datetime: pass value.date()")
    if not isinstance(value, _dt.date):
        raise ValueError(f"expected a date ('YYYY-MM-DD' or a date object), got {type(value).__name__}")
    return value


def _uuid(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str):
        if _UUID.fullmatch(value):
            return uuid.UUID(value)
        if _in_arguments(info):
            raise ValueError(f"{value!r} is not a UUID: expected the 8-4-4-4-12 hex form or a UUID")
        return value
    if not isinstance(value, uuid.UUID):
        raise ValueError(f"expected a UUID (a string or uuid.UUID), got {type(value).__name__}")
    return value


def _iso(value: Any) -> Any:
    """A datetime or date in its ISO form, UTC as ``Z`` (a text kept from a result stays as it is)."""
    if isinstance(value, _dt.datetime) and value.utcoffset() == _dt.timedelta(0):
        return value.replace(tzinfo=None).isoformat() + "Z"
    return value.isoformat() if isinstance(value, _dt.date) else value


DateTime = Annotated[
    _dt.datetime,
    PlainValidator(_date_time, json_schema_input_type=str),
    PlainSerializer(_iso, return_type=Any, when_used="json"),
]
"""``format: date-time``: a datetime with tzinfo or an RFC 3339 string, sent as ``isoformat()``."""
Date = Annotated[
    _dt.date,
    PlainValidator(_date, json_schema_input_type=str),
    PlainSerializer(_iso, return_type=Any, when_used="json"),
]
"""``format: date``: a date or ``'YYYY-MM-DD'``."""


def _uuid_text(value: Any) -> Any:
    """A UUID as its string; anything else (a union's other member, e.g. an int) as it is."""
    return str(value) if isinstance(value, uuid.UUID) else value


Uuid = Annotated[
    uuid.UUID,
    PlainValidator(_uuid, json_schema_input_type=str),
    PlainSerializer(_uuid_text, return_type=Any, when_used="json"),
]
"""``format: uuid``: a UUID or its hyphenated string, sent lower-case."""


class _Shown(str):
    """An annotation shown as written (``inspect`` would quote a plain string)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def _shown_default(default: Any) -> Any:
    if default is ...:
        return _Shown("...")  # a long default, written out in the docstring
    if isinstance(default, float) and not math.isfinite(default):
        return _Shown(f"float({str(default)!r})")
    return default


def _shown_signature(stub: Callable[..., Any]) -> inspect.Signature:
    """The stub's signature with its annotations and defaults shown as in the source."""
    signature = inspect.signature(stub)
    parameters = [
        p.replace(
            annotation=_Shown(p.annotation) if isinstance(p.annotation, str) else p.annotation,
            default=_shown_default(p.default),
        )
        for p in signature.parameters.values()
    ]
    result = signature.return_annotation
    return signature.replace(
        parameters=parameters, return_annotation=_Shown(result) if isinstance(result, str) else result
    )


def tool(
    server: str,
    name: str,
    args_model: type[BaseModel],
    *,
    result: Any = None,
    structured: bool = False,
    unwrap: bool = False,
    always: tuple[str, ...] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make ``stub`` (signature and docstring only) call tool ``name`` of MCP server ``server``.

    ``structured``: the tool has an output schema and returns ``result`` (a model or type);
    ``unwrap``: that schema is MCP's ``{"result": ...}`` wrapper; ``always``: argument fields sent
    even when not given (required on the wire, but with a default).
    """

    def decorate(stub: Callable[..., Any]) -> Callable[..., Any]:
        function_name = stub.__name__

        @functools.wraps(stub)
        def call(*args: Any, **kwargs: Any) -> Any:
            if args:
                raise TypeError(
                    f"{function_name}() takes keyword arguments only: "
                    f"call it as {function_name}(name=value, ...)"
                )
            validated = args_model.model_validate(kwargs, context=ARGUMENTS)
            if always:
                validated.__pydantic_fields_set__.update(always)
            arguments = validated.model_dump(
                by_alias=True, exclude_unset=True, mode="json", warnings=False, context=ARGUMENTS
            )
            if structured:
                _build_validator(result)  # now, not after an approval the call may wait for
            response = runtime.call_tool(server, name, arguments)
            if not structured:
                return runtime.result_text(response)
            return _structured_result(response, result, unwrap, f"{server}.{name}")

        call.__signature__ = _shown_signature(stub)  # type: ignore[attr-defined]
        call.__ipybox_tool__ = (server, name)  # type: ignore[attr-defined]
        prepare = getattr(runtime, "prepare_while_waiting", None)  # a kernel's older runtime has none
        if prepare is not None:
            prepare(functools.partial(_build_models, args_model, result if structured else None))
        return call

    return decorate


def _structured_result(response: runtime.ToolResponse, result: Any, unwrap: bool, where: str) -> Any:
    data = response.structured
    if data is None:  # no structuredContent: servers also send it as JSON text
        try:
            data = json.loads(response.text)
        except ValueError:
            _warn(f"{where} returned no structured content; returning its text instead")
            return runtime.result_text(response)
    if unwrap and isinstance(data, dict) and "result" in data:
        data = data["result"]
    if isinstance(result, type) and issubclass(result, BaseModel):
        try:
            return result.model_validate(data)
        except ValidationError as error:
            _warn(f"{where}: the result does not match its output schema ({_brief(error)}); returned as is")
            return result.model_construct(**data) if isinstance(data, dict) else data
    try:
        return _adapter(result).validate_python(data)
    except ValidationError as error:
        _warn(f"{where}: the result does not match its output schema ({_brief(error)}); returned unvalidated")
        return data


@functools.lru_cache(maxsize=256)
def _adapter(result: Any) -> TypeAdapter[Any]:
    return TypeAdapter(result)


def _build_models(args_model: type[BaseModel], result: Any) -> None:
    """Build a tool's argument model and its result's validator (``None``: no structured result)."""
    if not args_model.__pydantic_complete__:
        args_model.model_rebuild(raise_errors=False)
    if result is not None:
        _build_validator(result)


def _build_validator(result: Any) -> None:
    """Build what validating ``result`` first builds (its schema and validator)."""
    model = isinstance(result, type) and issubclass(result, BaseModel)
    if model and result.__pydantic_complete__:
        return
    with contextlib.suppress(Exception):  # a failure shows when the result is validated
        if model:
            result.model_rebuild(raise_errors=False)
        else:
            _adapter(result)


def _brief(error: ValidationError) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "value"
    more = f", and {error.error_count() - 1} more" if error.error_count() > 1 else ""
    return f"{location}: {first['msg']}{more}"


def _warn(message: str) -> None:
    warnings.warn(message, ResultValidationWarning, stacklevel=4)
