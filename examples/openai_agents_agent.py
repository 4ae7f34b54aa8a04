"""An OpenAI Agents SDK agent that acts by writing Python; you approve its MCP calls in the terminal.

    python examples/openai_agents_agent.py            # a real model (needs OPENAI_API_KEY)
    python examples/openai_agents_agent.py --offline  # a scripted model, no network
    python examples/openai_agents_agent.py --yes      # approve every call automatically

The agent gets one tool, ``execute_code``. Its code runs in a stateful IPython kernel and calls the
bundled demo shop MCP server through a generated Python API (``from mcptools.shop import ...``).
Read-only tools are allowed by the executor's rules; every other MCP call made by the code stops
the run as a regular ``ToolApprovalItem`` in ``result.interruptions``, which you approve or reject
here before the run resumes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from typing import Any

from agents import Agent, ModelSettings, Runner, RunResultStreaming, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from ipybox_core import ApprovalRules, CodeExecutor, ExecutionEvent, OutputChunk, ask_approval
from ipybox_integrations.openai_agents import CodeActionTool

DEMO_SERVER = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}
TASK = "Which books are in stock, what do they cost in EUR? Order the cheapest one."

BROWSE = """\
from mcptools.shop import exchange_rate, list_products, place_order

eur = exchange_rate(currency="EUR")
books = list_products(category="books", in_stock_only=True).products
for book in books:
    print(f"{book.id}  {book.name[:45]:45} {book.price_usd * eur:7.2f} EUR")
cheapest = min(books, key=lambda b: b.price_usd)
"""
ORDER = """\
try:
    order = place_order(product_id=cheapest.id, quantity=1)
    print(f"ordered {cheapest.name!r}: {order.order_id}, {order.total_usd * eur:.2f} EUR")
except PermissionError as rejected:
    print(f"the order was not approved: {rejected}")
"""


def offline_model() -> ScriptedModel:
    """A scripted stand-in for an LLM: two code actions, then a summary of the last output."""

    def summarize(call: ModelCall) -> list[Any]:
        outputs = [
            item
            for item in call.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        return [assistant_message(f"Done. The last code action printed:\n{outputs[-1]['output']}")]

    return ScriptedModel(
        [
            [function_call("execute_code", {"code": BROWSE}, call_id="call_browse")],
            [function_call("execute_code", {"code": ORDER}, call_id="call_order")],
            ModelStep.respond(summarize),
        ]
    )


def print_live(event: ExecutionEvent) -> None:
    """Kernel output as the code prints it."""
    if isinstance(event, OutputChunk):
        print("".join(f"  | {line}\n" for line in event.text.splitlines()), end="", flush=True)


async def show_stream(result: RunResultStreaming) -> None:
    async for event in result.stream_events():
        if event.type != "run_item_stream_event":
            continue
        if event.name == "tool_called":
            arguments = getattr(event.item.raw_item, "arguments", "")
            print(f"\n--- the agent calls execute_code ---\n{_code(arguments)}", flush=True)
        elif event.name == "message_output_created":
            print(f"\n--- the agent answers ---\n{_text(event.item.raw_item)}")


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--offline", action="store_true", help="use a scripted model (no network)")
    parser.add_argument("--yes", action="store_true", help="approve every MCP call automatically")
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4.1"), help="OpenAI model")
    args = parser.parse_args()

    offline = args.offline or not os.environ.get("OPENAI_API_KEY")
    if offline:
        if not args.offline:
            print("(OPENAI_API_KEY is not set: using the offline scripted model)")
        set_tracing_disabled(True)  # the SDK exports traces to OpenAI by default
    auto = args.yes or not sys.stdin.isatty()
    if auto and not args.yes:
        print("(stdin is not a terminal: approving MCP calls automatically)")

    with tempfile.TemporaryDirectory(prefix="ipybox-oa-") as workspace:
        print("starting the kernel and the demo shop MCP server ...", flush=True)
        # --8<-- [start:agent]
        rules = ApprovalRules(allow_read_only=True)  # read-only tools run without asking
        async with CodeExecutor(workspace=workspace, approval=rules) as executor:
            await executor.register_mcp_server("shop", DEMO_SERVER)
            code = CodeActionTool(executor, on_event=print_live)
            agent = Agent(
                name="shop_assistant",
                instructions=code.instructions("You are a shopping assistant. Be brief."),
                tools=[code.tool],
                model=offline_model() if offline else args.model,
                model_settings=ModelSettings(parallel_tool_calls=False),
            )
            print(f"\nuser: {TASK}")
            result = Runner.run_streamed(agent, TASK)
            await show_stream(result)
            while result.interruptions:
                state = result.to_state()
                for item in result.interruptions:
                    request = code.request_for(item)  # the held MCP call: server, tool, args, hints
                    if request is not None and await ask_approval(request, auto=auto):
                        state.approve(item)
                    else:
                        state.reject(item, rejection_message="the user said no")
                result = Runner.run_streamed(agent, state)
                await show_stream(result)
        # --8<-- [end:agent]
    return 0


def _code(arguments: str) -> str:
    try:
        return str(json.loads(arguments)["code"]).rstrip()
    except (ValueError, KeyError, TypeError):
        return arguments


def _text(message: Any) -> str:
    return "".join(getattr(part, "text", "") for part in getattr(message, "content", []))


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
