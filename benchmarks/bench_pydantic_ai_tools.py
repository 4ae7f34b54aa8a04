"""PydanticAI agent tools: the per-call cost of an agent's own tool called from the code.

Run: ``.venv/bin/python benchmarks/bench_pydantic_ai_tools.py [--calls 200] [--rounds 5]``. Every
figure is measured in this run, the variants interleaved round by round (one kernel cell per round
times all of them), so machine noise hits all alike.

An agent has two plain tools, ``add`` and ``add_ruled`` (the same function); ``CodeAction`` offers
both to the code. The executor's rules allow ``bench.*`` (the MCP tools) and ``agent_tools.add_ruled``:

=======================  ========================================================================
variant                  what is timed, per call
=======================  ========================================================================
agent tool (asked)       ``from agent_tools import add``: the call is held by the gate, decided by
                         ``CodeAction`` (PydanticAI's call path: no approval needed, the tool runs)
                         and its result sent back: the default path
agent tool (by rule)     ``add_ruled``: the rule lets it through, the tool server runs it in the
                         run bound for the execution
MCP tool (by rule)       ``from mcptools.bench import add``: the stdio test server, let through by
                         the rule (no approval round trip)
direct function          the tool's function called in the application
=======================  ========================================================================

The cost the adapter adds to a call is *asked - by rule* (the round trip through ``execute_code``'s
event loop and PydanticAI's ``ToolManager``); *asked / MCP* compares it with an MCP call.

Measured 2026-12-03 on the shared 2-CPU machine with other agents' test runs going (200 calls x 5
rounds, medians, two runs): agent tool asked 4.1-4.5 ms, by rule 3.3-3.6 ms, MCP tool by rule
9.1-12.2 ms, direct function < 0.001 ms; the adapter's cost per call +0.8-0.9 ms, ratio asked / MCP
0.37-0.45. Most of an agent tool call is PydanticAI's call path (validation, hooks) and the tool
server's round trip; an MCP call crosses one process more.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ipybox_core import ApprovalRules, CodeExecutor
from ipybox_integrations.pydantic_ai import CodeAction

sys.path.insert(0, str(Path(__file__).parent))
from _agent_tool_round import KERNEL_ROUND, SERVER, TINY_ARGS, arguments, report

__all__ = ["TINY_ARGS"]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def one_cell(code: str) -> FunctionModel:
    """A model that runs ``code`` once, then answers with its output."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if returns:
            return ModelResponse(parts=[TextPart(returns[-1].model_response_str())])
        return ModelResponse(parts=[ToolCallPart("execute_code", {"code": code})])

    return FunctionModel(respond)


def _direct(calls: int) -> float:
    started = time.perf_counter()
    for i in range(calls):
        add(i, 1)
    return (time.perf_counter() - started) / calls


async def measure(calls: int, rounds: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"asked": [], "ruled": [], "mcp": [], "direct": []}
    rules = ApprovalRules(allow=["bench.*", "agent_tools.add_ruled"])
    with tempfile.TemporaryDirectory() as ws:
        async with CodeExecutor(workspace=ws, approval=rules) as executor:
            await executor.register_mcp_server("bench", SERVER)
            agent: Agent[None, Any] = Agent(
                one_cell(KERNEL_ROUND.format(calls=calls)),
                tools=[add],
                capabilities=[CodeAction(executor)],
            )
            agent.tool_plain(name="add_ruled")(add)
            for _ in range(rounds):
                result = await agent.run("go")
                for name, seconds in json.loads(str(result.output)).items():
                    samples[name].append(seconds)
                samples["direct"].append(_direct(calls))
    return samples


def main() -> None:
    args = arguments(__doc__, calls=200)
    samples = asyncio.run(measure(args.calls, args.rounds))
    labels = {
        "asked": "agent tool (asked)",
        "ruled": "agent tool (by rule)",
        "mcp": "MCP tool (by rule)",
        "direct": "direct function",
    }
    median = report(samples, labels, args.calls, args.rounds)
    print(f"adapter's cost per call (asked - by rule): {(median['asked'] - median['ruled']) * 1e3:+.3f} ms")
    print(f"ratio agent tool (asked) / MCP tool: {median['asked'] / median['mcp']:.2f}")


if __name__ == "__main__":
    main()
