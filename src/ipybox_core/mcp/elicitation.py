"""Questions an upstream MCP tool asks its user (``elicitation/create``), routed to the application.

An MCP server may ask, in the middle of a tool call, for a small form to be filled in (form mode:
a flat JSON schema of strings, numbers, booleans and enums, with defaults), or for the user to open
a URL for something that must not pass through the client (URL mode). ipybox hands the
application an :class:`ElicitationRequest` through its ``elicit`` callback
(``McpRegistry(elicit=...)``, ``CodeExecutor(mcp_elicit=...)``), which answers with an
:class:`ElicitationAnswer`: accept with content, decline or cancel. Accepted content is completed
with the schema's defaults and validated against the schema before it is sent back; content that
does not match is refused with one line naming the problem. Without a callback every question is
declined, and the code that called the tool is told why on its stderr.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Elicit",
    "ElicitationAnswer",
    "ElicitationContentError",
    "ElicitationRequest",
    "complete_content",
]


@dataclass(frozen=True)
class ElicitationRequest:
    """An MCP server asks the application's user to fill in a form during a tool call."""

    server: str
    """The server's name in the registry (its key in ``mcpServers``)."""
    tool: str | None
    """The tool whose call asked (``None`` when several calls of the server were running)."""
    message: str
    """What the server says to the user."""
    schema: Mapping[str, Any]
    """The requested JSON schema (an object of primitive properties); empty in URL mode."""
    url: str | None = None
    """URL mode: the page the user is asked to open (the answer says only whether they agreed;
    nothing the user enters there passes through ipybox). ``None``: a form."""

    @property
    def defaults(self) -> dict[str, Any]:
        """The schema's default value of each property that has one."""
        properties: Mapping[str, Any] = self.schema.get("properties") or {}
        return {
            name: spec["default"]
            for name, spec in properties.items()
            if isinstance(spec, Mapping) and "default" in spec
        }


@dataclass(frozen=True)
class ElicitationAnswer:
    """The application's answer: ``accept`` with ``content``, ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] = field(default_factory=dict)
    """The form's values (``accept`` only); properties left out get the schema's defaults."""

    @classmethod
    def accept(cls, content: Mapping[str, Any] | None = None) -> ElicitationAnswer:
        """Accept with ``content`` (default: the schema's defaults only)."""
        return cls("accept", dict(content or {}))

    @classmethod
    def decline(cls) -> ElicitationAnswer:
        """The user said no."""
        return cls("decline")

    @classmethod
    def cancel(cls) -> ElicitationAnswer:
        """The user dismissed the question without answering."""
        return cls("cancel")


Elicit = Callable[[ElicitationRequest], Awaitable[ElicitationAnswer]]
"""The application's answer to an :class:`ElicitationRequest`."""


class ElicitationContentError(ValueError):
    """Accepted content that does not match the requested schema."""


def complete_content(schema: Mapping[str, Any], content: Mapping[str, Any]) -> dict[str, Any]:
    """``content`` with the schema's defaults filled in, checked against ``schema``.

    Raises:
        ElicitationContentError: a value breaks the schema (one line: which value and why).
    """
    import jsonschema  # type: ignore[import-untyped]  # no type information ships with it

    request = ElicitationRequest(server="", tool=None, message="", schema=schema)
    completed = {**request.defaults, **content}
    validator = jsonschema.Draft202012Validator(dict(schema))
    error = jsonschema.exceptions.best_match(validator.iter_errors(completed))
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path)
        raise ElicitationContentError(f"{where + ': ' if where else ''}{error.message}")
    return completed
