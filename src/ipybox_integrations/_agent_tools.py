"""What every adapter's ``agent_tools=`` option shares: its forms, its check, the selection itself.

``agent_tools`` picks which of the agent's own tools the code can call (``from agent_tools import
...``): ``None`` (the default: all), ``True`` (all), ``False`` (none),
tool names (a list) or a predicate over the framework's tool objects.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ipybox_core.errors import ConfigError
from ipybox_core.hosttools import HostCall, HostTool

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


@dataclass(frozen=True, eq=False)
class AgentToolRun:
    """The host function of one of the agent's tools. It marks the host tools an adapter registered
    (another agent's are replaced, the application's own stay), and ``key`` names what it runs
    (the framework's tool object, or what its definition is), so an unchanged tool is not
    registered again."""

    run: Callable[[HostCall], Awaitable[Any]]
    key: object

    async def __call__(self, call: HostCall) -> Any:
        return await self.run(call)


def bind_run(executor: object, context: object) -> None:
    """Run the agent tools ``executor``'s code calls from now on with ``context`` (the framework's
    run), where the executor runs host tools (``bind_tool_context``)."""
    bind = getattr(executor, "bind_tool_context", None)
    if bind is not None:
        bind(context)


_served: weakref.WeakKeyDictionary[Any, tuple[object, ...]] = weakref.WeakKeyDictionary()
"""What each source whose host tools cannot be read back (``Sessions``, ``RemoteSessions``) was
last given."""


async def register_agent_tools(source: object, agents: Sequence[HostTool]) -> bool:
    """Give ``source`` the agent's tools ``agents`` (each run by an :class:`AgentToolRun`) beside
    the host tools the application registered itself, if what it serves differs; True when they
    were registered. An agent's tool wins a name both use; another agent's tools are replaced."""
    register = getattr(source, "register_host_tools", None)
    if register is None:
        return False
    current = getattr(source, "host_tools", None)  # a CodeExecutor's; Sessions keep theirs
    names = {tool.name for tool in agents}
    if isinstance(current, list):
        own = [tool for tool in current if not isinstance(tool.run, AgentToolRun) and tool.name not in names]
        served = _keys(current)
    else:
        own, served = [], _served.get(source, ())
    wanted = [*own, *agents]
    if _keys(wanted) == served:
        return False
    await register(wanted)
    _served[source] = _keys(wanted)
    return True


def _keys(tools: Sequence[HostTool]) -> tuple[object, ...]:
    """What a kernel's ``agent_tools`` package is made of: each name and what runs behind it."""
    return tuple((t.name, t.run.key if isinstance(t.run, AgentToolRun) else id(t.run)) for t in tools)
