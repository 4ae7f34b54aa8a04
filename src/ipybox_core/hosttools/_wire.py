"""Host tools between an application and an ipybox service: their definitions, one call, its outcome.

Over ``RemoteSessions`` the tool's code stays in the application: the application sends each
tool's definition (:func:`tool_data`) with its ``execute_code`` call, the service generates the
kernel's ``agent_tools`` package from it (:func:`tools_from_data`), and a call of the code comes
back to the application as a round of its own (:func:`call_data`). The application runs it and
answers with the outcome (:func:`run_call`); the service hands it to the code (:func:`outcome_value`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ipybox_core.errors import ConfigError, McpTimeout, ToolError, UnknownToolError
from ipybox_core.hosttools._backend import HostTools, json_data, run_host_call
from ipybox_core.hosttools._tool import HOST_SERVER, HostCall, HostFunction, HostTool

_MAX_NAME = 128


def tool_data(tool: HostTool) -> dict[str, Any]:
    """What the service needs of ``tool`` to generate its function (not its code)."""
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "read_only": tool.read_only,
        "timeout": tool.timeout,
    }


def tools_from_data(data: object, run: HostFunction) -> list[HostTool]:
    """The host tools ``data`` defines, each run by ``run``.

    Raises:
        ConfigError: ``data`` is not a list of tool definitions (every problem named).
    """
    if not isinstance(data, list):
        raise ConfigError("the agent tools must be a list of tool definitions")
    tools, problems = [], []
    for index, item in enumerate(data):
        problem = _problem(item)
        if problem is not None:
            problems.append(f"tool {index}: {problem}")
            continue
        assert isinstance(item, dict)
        tools.append(
            HostTool(
                name=item["name"],
                run=run,
                description=item.get("description") or "",
                input_schema=item.get("input_schema") or {"type": "object", "properties": {}},
                output_schema=item.get("output_schema"),
                read_only=item.get("read_only"),
                timeout=item.get("timeout"),
            )
        )
    if problems:
        raise ConfigError("; ".join(problems))
    return tools


def _problem(item: object) -> str | None:
    if not isinstance(item, dict):
        return "not an object"
    name = item.get("name")
    if not isinstance(name, str) or not 0 < len(name) <= _MAX_NAME:
        return f"name must be a string of 1 to {_MAX_NAME} characters, not {name!r}"
    for key in ("input_schema", "output_schema"):
        if item.get(key) is not None and not isinstance(item[key], dict):
            return f"{key} of {name!r} must be a JSON Schema object"
    if not isinstance(item.get("description") or "", str):
        return f"description of {name!r} must be a string"
    if not isinstance(item.get("read_only"), bool | None):
        return f"read_only of {name!r} must be true, false or null"
    timeout = item.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf
    ):
        return f"timeout of {name!r} must be a positive number of seconds"
    return None


@dataclass(frozen=True)
class CallQuestion:
    """A host tool call of the code, handed to the application to run."""

    id: str
    tool: str
    arguments: dict[str, Any]
    timeout: float | None
    """Seconds the application may take (``None``: no limit)."""


def call_data(question: CallQuestion) -> dict[str, Any]:
    """``question`` as the service sends it (``ipybox.dev/host_call``)."""
    return {
        "id": question.id,
        "tool": question.tool,
        "arguments": question.arguments,
        "timeout": question.timeout,
    }


def call_from_data(data: object) -> CallQuestion | None:
    """The :class:`CallQuestion` in ``data`` (``None``: not one)."""
    if not isinstance(data, dict):
        return None
    tool, arguments, timeout = data.get("tool"), data.get("arguments"), data.get("timeout")
    if not isinstance(tool, str) or not isinstance(arguments, dict):
        return None
    return CallQuestion(
        id=str(data.get("id") or ""),
        tool=tool,
        arguments=arguments,
        timeout=float(timeout) if isinstance(timeout, int | float) else None,
    )


async def run_call(tools: HostTools, question: CallQuestion, context: Any) -> str:
    """Run ``question`` with this process's ``tools`` (``context`` bound); its outcome as the
    answer's text: ``{"result": ...}``, ``{"error": ...}`` or ``{"timeout": ...}``."""
    try:
        tool = tools.get(question.tool)
    except UnknownToolError:
        known = ", ".join(sorted(tool.name for tool in tools)) or "none"
        message = f"this application process has no agent tool {question.tool!r} (it has: {known})"
        return json.dumps({"error": message})
    try:
        value = await run_host_call(
            tool, HostCall(question.tool, question.arguments, context), question.timeout
        )
        data = json_data(tool, value)
    except McpTimeout as error:
        return json.dumps({"timeout": str(error)})
    except ToolError as error:
        return json.dumps({"error": str(error)})
    return json.dumps({"result": data}, ensure_ascii=False)


def outcome_value(answer: object, tool: str) -> Any:
    """What ``tool`` returned, from the application's ``answer`` (:func:`run_call`'s text).

    Raises:
        ToolError: the tool raised (its message), or the answer is not an outcome.
        McpTimeout: the tool did not finish in time.
    """
    try:
        data = json.loads(answer) if isinstance(answer, str) else None
    except ValueError:
        data = None
    if isinstance(data, dict) and "result" in data:
        return data["result"]
    if isinstance(data, dict) and isinstance(data.get("timeout"), str):
        raise McpTimeout(data["timeout"], server=HOST_SERVER)
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        raise ToolError(data["error"], server=HOST_SERVER, tool=tool)
    raise ToolError(
        f"the application's answer to the call of agent tool {tool!r} is not an outcome",
        server=HOST_SERVER,
        tool=tool,
    )
