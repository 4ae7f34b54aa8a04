"""The one place ipybox builds a PydanticAI ``ToolManager`` (``_nested.py``) still fits the installed version.

``dispatch_held_call`` constructs ``ToolManager(toolset=, root_capability=, ctx=, tools=)`` and calls
``handle_call(call, approved=, wrap_validation_errors=)``; both are outside PydanticAI's documented
API. If a release changes them, this test fails naming what changed; pyproject.toml pins the range
these tests ran against (the behaviour itself is covered by the inline and deferred tests).
"""

from __future__ import annotations

import dataclasses
import inspect

from pydantic_ai import RunContext
from pydantic_ai.tool_manager import ToolManager


def test_tool_manager_takes_what_dispatch_held_call_passes() -> None:
    construct = inspect.signature(ToolManager).parameters
    assert {"toolset", "root_capability", "ctx", "tools"} <= set(construct), construct
    handle = inspect.signature(ToolManager.handle_call).parameters
    assert {"call", "approved", "wrap_validation_errors"} <= set(handle), handle


def test_run_context_carries_the_tool_manager_and_root_capability() -> None:
    fields = {field.name for field in dataclasses.fields(RunContext)}
    assert {"tool_manager", "root_capability", "tool_call_approved", "tool_call_metadata"} <= fields
