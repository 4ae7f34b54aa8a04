"""Host tools: the application's own async functions, called from the kernel's code like MCP tools.

    python examples/host_tools.py

The kernel gets typed functions (``from agent_tools import get_order``) generated from the JSON
schemas; each call passes the approval policy as a call of the server ``agent_tools``, then runs
here, in the application, with the context bound for the execution. The kernel never holds the
function's code or what it uses (a database handle, credentials).
"""

from __future__ import annotations

import asyncio
import tempfile

from ipybox_core import ApprovalRules, CodeExecutor
from ipybox_core.hosttools import HostCall, HostTool

ORDERS = {"ord-1": {"id": "ord-1", "total_usd": 30.0, "status": "delivered"}}


async def main(workspace: str) -> None:
    # --8<-- [start:host_tools]
    async def get_order(call: HostCall) -> dict[str, object]:
        """Runs in the application: the kernel sends only the arguments."""
        if call.arguments["order_id"] not in ORDERS:
            raise LookupError(f"no order {call.arguments['order_id']}")  # ToolError in the code
        return {**ORDERS[call.arguments["order_id"]], "asked_by": call.context}

    tool = HostTool(
        name="get_order",
        run=get_order,
        description="One order by id.",
        input_schema={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
        read_only=True,
    )
    rules = ApprovalRules(allow_read_only=True)  # the policy sees it as agent_tools.get_order
    async with CodeExecutor(workspace=workspace, host_tools=[tool], approval=rules) as executor:
        print(executor.api_reference().splitlines()[-2])  # the prompt lists it like an MCP tool
        executor.bind_tool_context("carol")  # e.g. a framework's run context, per execution
        result = await executor.execute(
            "from agent_tools import get_order\n"
            "from ipybox_core.errors import ToolError\n"
            "print(get_order(order_id='ord-1'))\n"
            "try:\n    get_order(order_id='ord-9')\n"
            "except ToolError as error:\n    print('ToolError:', error)"
        )
        print(result.text, end="")
    # --8<-- [end:host_tools]


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ipybox-host-tools-") as workspace:
        asyncio.run(main(workspace))
