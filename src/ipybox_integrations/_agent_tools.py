"""What every adapter's ``agent_tools=`` option shares: its forms, its check, the selection itself.

``agent_tools`` picks which of the agent's own tools the code can call (``from agent_tools import
...``): ``None`` (the default: all), ``True`` (all), ``False`` (none),
tool names (a list) or a predicate over the framework's tool objects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from ipybox_core.errors import ConfigError

T = TypeVar("T")

NO_APPROVAL = "tool:no-approval"
"""``decided_by`` in the audit log of a call from the code that the agent's own settings let
through without asking (a tool that needs no approval)."""

NO_HOST_TOOLS = (
    "agent_tools= needs an executor that can call the application's tools from the code "
    "(CodeExecutor, Sessions or RemoteSessions: one with register_host_tools); leave agent_tools out"
)


def check_selection(selection: object, *, hosts: bool) -> object:
    """``selection`` as it applies (``None`` where the executor has no host tools: ``False``);
    :class:`ConfigError` for a form that is not one, or for an explicit selection there."""
    if isinstance(selection, str):
        raise ConfigError(f"agent_tools takes a list of tool names, not the string {selection!r}")
    if not (selection is None or isinstance(selection, bool | Sequence) or callable(selection)):
        raise ConfigError(
            f"agent_tools must be True, False, a list of tool names or a predicate, not {selection!r}"
        )
    if selection not in (None, False) and not hosts:
        raise ConfigError(NO_HOST_TOOLS)
    return False if selection is None and not hosts else selection


def pick(tools: Sequence[T], selection: object, name: Callable[[T], str]) -> list[T]:
    """The ``tools`` a checked ``selection`` takes."""
    if selection is False:
        return []
    if selection is None or selection is True:
        return list(tools)
    if callable(selection):
        return [tool for tool in tools if selection(tool)]
    names = set(selection) if isinstance(selection, Sequence) else set()
    return [tool for tool in tools if name(tool) in names]
