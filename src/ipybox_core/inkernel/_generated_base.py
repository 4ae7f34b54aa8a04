"""Support code of a generated MCP tool package (copied into it as ``_base.py``; runs in the kernel).

Imports only the standard library, pydantic and :mod:`ipybox_core.inkernel.runtime` (the one
kernel-side module allowed pydantic: generated models need it). Each generated tool
module defines its argument model and a documented stub function; :func:`tool` turns the stub
into the callable that validates the arguments, sends the call and converts the result.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import warnings
from collections.abc import Callable
from typing import Any

from pydantic import AfterValidator, BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from ipybox_core.inkernel import runtime

__all__ = ["Args", "Model", "ResultValidationWarning", "is_none", "tool", "unique_items"]


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
            validated = args_model.model_validate(kwargs)
            if always:
                validated.__pydantic_fields_set__.update(always)
            arguments = validated.model_dump(by_alias=True, exclude_unset=True, mode="json", warnings=False)
            response = runtime.call_tool(server, name, arguments)
            if not structured:
                return runtime.result_text(response)
            return _structured_result(response, result, unwrap, f"{server}.{name}")

        call.__signature__ = _shown_signature(stub)  # type: ignore[attr-defined]
        call.__ipybox_tool__ = (server, name)  # type: ignore[attr-defined]
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


def _brief(error: ValidationError) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "value"
    more = f", and {error.error_count() - 1} more" if error.error_count() > 1 else ""
    return f"{location}: {first['msg']}{more}"


def _warn(message: str) -> None:
    warnings.warn(message, ResultValidationWarning, stacklevel=4)
