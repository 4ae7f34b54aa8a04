"""Each MCP call the code makes, as a child tool run of ``execute_code`` in LangChain's callbacks.

A tracer (LangSmith, or any callback handler) sees one ``execute_code`` tool run with a child run
per call it sent: named after the call (``shop.place_order``), with the arguments it ran with and
the MCP tool's result, or its error, as a native tool's run would show them. Calls rejected by the
reviewer never ran and get no run, as for a native tool.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.runnables import ensure_config

from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import ToolError
from ipybox_core.hosttools import HOST_SERVER
from ipybox_integrations._outcomes import UNREPORTED, outcome_error, outcome_value


async def record_call(request: ApprovalRequest) -> None:
    """Once ``request`` is decided: the child run of the call it sent, ended with what it came to.

    Called inside the ``execute_code`` tool: the current config's callbacks are its run's children.
    """
    decision = request.decision
    if decision is None or not decision.approved or request.server == HOST_SERVER:
        return  # an agent tool's call is its own tool run (a child of execute_code too)
    manager = AsyncCallbackManager.configure(inheritable_callbacks=ensure_config().get("callbacks"))
    if not manager.handlers:
        return
    arguments: dict[str, Any] = decision.arguments if decision.arguments is not None else request.args
    run = await manager.on_tool_start(
        {"name": request.name, "description": f"MCP tool {request.name}, called by the code"},
        json.dumps(arguments, default=str, ensure_ascii=False),
        name=request.name,
        inputs=arguments,
    )
    outcome = await request.outcome()
    if outcome is None:
        await run.on_tool_end(UNREPORTED)
    elif outcome.ok:
        await run.on_tool_end(outcome_value(outcome))
    else:
        await run.on_tool_error(ToolError(outcome_error(outcome)))
