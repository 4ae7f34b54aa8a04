"""A PydanticAI agent that acts by writing Python, with you approving every MCP call it makes.

    python examples/pydantic_ai_agent.py                 # a real model: OPENAI_API_KEY, ANTHROPIC_API_KEY
    python examples/pydantic_ai_agent.py --model NAME    # or any PydanticAI model name
    python examples/pydantic_ai_agent.py --offline       # a scripted model: no key, no network
    python examples/pydantic_ai_agent.py --offline --yes # approve every call without asking
    python examples/pydantic_ai_agent.py --inline        # approve during the run (HandleDeferredToolCalls)

The agent gets one tool, ``execute_code``. Its code runs in a stateful IPython kernel and calls the
tools of the bundled demo MCP server (a small shop) as Python functions. Each call waits for your
decision: by default the run ends with ``DeferredToolRequests`` while the kernel waits, and the next
run carries your answers (``--inline`` answers inside the run instead).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic_ai import (
    Agent,
    AgentRunResult,
    AgentRunResultEvent,
    DeferredToolRequests,
    DeferredToolResults,
    FunctionToolCallEvent,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolDenied,
    ToolReturnPart,
)
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from ipybox_core import CodeExecutor, ask_approval
from ipybox_integrations.pydantic_ai import (
    CodeAction,
    CodeOutput,
    pending_approvals,
)

PROMPT = "Show the shop's books with their prices in EUR, then order one copy of the cheapest."
DEMO_SERVER = {"command": sys.executable, "args": ["-m", "ipybox_core.demo.server"]}

# --- the offline model: writes the code a capable model would write ----------------------------

SCRIPTED_CODE = [
    """\
from mcptools.shop import exchange_rate, list_products

books = list_products(category="books").products
eur = exchange_rate(currency="EUR")
for book in books:
    print(f"{book.name}: {book.price_usd * eur:.2f} EUR")
cheapest = min(books, key=lambda book: book.price_usd)
print("cheapest:", cheapest.id)
""",
    """\
from mcptools.shop import place_order

try:
    order = place_order(product_id=cheapest.id, quantity=1)
    print(f"ordered {cheapest.name!r}: {order.order_id}, {order.total_usd * eur:.2f} EUR")
except PermissionError as error:
    print(f"the order was not approved: {error}")
""",
]


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call execute_code with the next piece of code, then summarise the last result."""
    returns = [part for message in messages for part in message.parts if isinstance(part, ToolReturnPart)]
    if len(returns) < len(SCRIPTED_CODE):
        code = SCRIPTED_CODE[len(returns)]
        return ModelResponse(
            parts=[ToolCallPart("execute_code", {"code": code}, tool_call_id=f"call_{len(returns)}")]
        )
    return ModelResponse(parts=[TextPart(f"Done. Last result: {returns[-1].model_response_str()}")])


async def scripted_stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """The same answers, streamed (``run_stream_events`` makes streamed model requests)."""
    part = scripted_model(messages, info).parts[0]
    if isinstance(part, TextPart):
        yield part.content
    else:
        assert isinstance(part, ToolCallPart)
        delta = DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id)
        yield {0: delta}


# --- approvals in the terminal -----------------------------------------------------------------


# --8<-- [start:approver]
class TerminalApprover:
    """Asks y/N for each call; approves everything when ``auto`` is set."""

    def __init__(self, auto: bool) -> None:
        self.auto = auto

    async def answer(self, requests: DeferredToolRequests) -> DeferredToolResults:
        """Answer each MCP call the code makes the PydanticAI way (inline or deferred alike)."""
        approvals: dict[str, bool | ToolDenied] = {}
        for approval in pending_approvals(requests):  # one per held call, with its description
            approved = await ask_approval(approval, auto=self.auto)  # "approve shop.place_order(...)? [y/N]"
            approvals[approval.tool_call_id] = True if approved else ToolDenied("the user said no")
        return requests.build_results(approvals=approvals)
        # --8<-- [end:approver]


# --- running the agent -------------------------------------------------------------------------


# --8<-- [start:stream]
async def run_streamed(agent: Agent[None, Any], shown: set[str], **run_options: Any) -> AgentRunResult[Any]:
    """Run the agent, printing the code it writes (once per call) and the code's output as it appears."""
    result: AgentRunResult[Any] | None = None
    async with agent.run_stream_events(**run_options) as events:
        async for event in events:
            if isinstance(event, FunctionToolCallEvent) and event.part.tool_call_id not in shown:
                shown.add(event.part.tool_call_id)
                print("\n--- the agent runs ---\n" + _indent(event.part.args_as_dict()["code"]))
            elif isinstance(event, CodeOutput):
                print(_indent(event.text), end="")
            elif isinstance(event, AgentRunResultEvent):
                result = event.result
    assert result is not None
    return result
    # --8<-- [end:stream]


async def main(args: argparse.Namespace) -> int:
    auto = args.yes or not sys.stdin.isatty()
    if auto and not args.yes:
        print("(stdin is not a terminal: approving every call automatically)")
    model: Any = args.model
    if args.offline:
        model = FunctionModel(scripted_model, stream_function=scripted_stream)
    approver = TerminalApprover(auto)
    shown: set[str] = set()

    with tempfile.TemporaryDirectory(prefix="ipybox-pai-") as tmp:
        # --8<-- [start:agent]
        async with CodeExecutor(workspace=Path(args.workspace or tmp)) as executor:
            await executor.register_mcp_server("shop", DEMO_SERVER)
            code_action = CodeAction(executor)
            capabilities: list[Any] = [code_action]
            if args.inline:  # decide each call during the run
                capabilities.append(
                    HandleDeferredToolCalls(handler=lambda _, requests: approver.answer(requests))
                )
            agent = Agent(
                model,
                instructions="You are a shopping assistant. Use execute_code to work with the shop.",
                capabilities=capabilities,
                output_type=[str, DeferredToolRequests],
            )
            try:
                result = await run_streamed(agent, shown, user_prompt=args.prompt)
                while isinstance(result.output, DeferredToolRequests):  # the kernel waits meanwhile
                    answers = await approver.answer(result.output)
                    history = result.all_messages()
                    result = await run_streamed(
                        agent, shown, message_history=history, deferred_tool_results=answers
                    )
            finally:
                await code_action.aclose()
        # --8<-- [end:agent]
    print(f"\n--- the agent answers ---\n{result.output}")
    return 0


def _indent(text: str) -> str:
    return "".join(f"  | {line}\n" for line in text.rstrip("\n").splitlines())


MODELS_BY_KEY = {"OPENAI_API_KEY": "openai:gpt-5", "ANTHROPIC_API_KEY": "anthropic:claude-sonnet-4-6"}


def default_model() -> str | None:
    """``$IPYBOX_MODEL``, else a model of the first provider whose API key is set."""
    if os.environ.get("IPYBOX_MODEL"):
        return os.environ["IPYBOX_MODEL"]
    return next((model for key, model in MODELS_BY_KEY.items() if os.environ.get(key)), None)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--offline", action="store_true", help="use a scripted model (no API key needed)")
    parser.add_argument("--yes", action="store_true", help="approve every MCP call without asking")
    parser.add_argument("--inline", action="store_true", help="approve inside the run, not between runs")
    parser.add_argument("--model", default=default_model(), help="a PydanticAI model name")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--workspace", help="kernel working directory (default: a temporary one)")
    args = parser.parse_args(argv)
    if not args.offline and args.model is None:
        keys = " or ".join(MODELS_BY_KEY)
        parser.error(f"no model: set {keys} (or IPYBOX_MODEL), pass --model, or run with --offline")
    return args


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(parse_args())))
