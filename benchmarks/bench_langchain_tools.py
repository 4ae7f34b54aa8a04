"""LangChain agent tools: the per-call cost of an agent's own tool called from the code.

Run: ``.venv/bin/python benchmarks/bench_langchain_tools.py [--calls 200] [--rounds 5]``. Every
figure is measured in this run, the variants interleaved round by round (one kernel cell per
round times all of them), so machine noise hits all alike.

A ``create_agent`` agent has two ``@tool`` tools, ``add`` and ``add_ruled`` (the same function),
and ``CodeActionMiddleware(executor, human_in_the_loop=hitl)`` with an ``interrupt_on`` that gates
neither. The executor's rules allow ``bench.*`` (the MCP tools) and ``agent_tools.add_ruled``:

- *agent tool (asked)*: ``from agent_tools import add``, held by the gate, let through by the
  middleware (``interrupt_on`` does not gate it), run through a LangGraph ``ToolNode`` with the
  ``execute_code`` call's state and config: the default path;
- *agent tool (by rule)*: ``add_ruled``, let through by the rule, the same ``ToolNode`` run;
- *MCP tool (by rule)*: ``from mcptools.bench import add``, the stdio test server;
- *direct*: ``add.invoke`` in the application (LangChain's tool call, no kernel).

*asked - by rule* is what the middleware's decision adds; *asked / MCP* compares a call of an
agent tool with an MCP call of the same function.

Measured 2026-12-03 on the shared 2-CPU machine at a load average of ~9 (other agents' test runs;
200 calls x 5 rounds, medians, two runs): agent tool asked 7.8-9.3 ms, by rule 3.0-3.2 ms, MCP tool
by rule 12.8-13.9 ms, direct 1.0 ms; the middleware's decision +4.9-6.1 ms a call, ratio asked / MCP
0.56-0.73. The fastest rounds (asked 3.1-3.4 ms, by rule 2.6-2.7 ms) put the decision at about
+0.5 ms: under load each of its hops (the request reaches ``execute_code``, which approves it)
waits for the event loop. An agent tool call stays cheaper than an MCP call, which crosses one
process more.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool

from ipybox_core import ApprovalRules, CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware

sys.path.insert(0, str(Path(__file__).parent))
from _agent_tool_round import KERNEL_ROUND, SERVER, TINY_ARGS, arguments, report

__all__ = ["TINY_ARGS"]


LABELS = {
    "asked": "agent tool (asked)",
    "ruled": "agent tool (by rule)",
    "mcp": "MCP tool (by rule)",
    "direct": "direct (add.invoke)",
}


def adders() -> list[BaseTool]:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @tool
    def add_ruled(a: int, b: int) -> int:
        """Add two integers (let through by the executor's rule)."""
        return a + b

    return [add, add_ruled]


class OneCell(BaseChatModel):
    """Runs ``code`` as one ``execute_code`` call, then answers with its output."""

    code: str

    @property
    def _llm_type(self) -> str:
        return "bench-one-cell"

    def bind_tools(self, tools: Any, **kwargs: Any) -> OneCell:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if messages[-1].type == "tool":
            reply = AIMessage(content=messages[-1].text)
        else:
            reply = AIMessage(
                content="", tool_calls=[{"name": "execute_code", "args": {"code": self.code}, "id": "c"}]
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _direct(add: BaseTool, calls: int) -> float:
    started = time.perf_counter()
    for i in range(calls):
        add.invoke({"a": i, "b": 1})
    return (time.perf_counter() - started) / calls


async def measure(calls: int, rounds: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in LABELS}
    rules = ApprovalRules(allow=["bench.*", "agent_tools.add_ruled"])
    tools = adders()
    with tempfile.TemporaryDirectory() as ws:
        async with CodeExecutor(workspace=ws, approval=rules) as executor:
            await executor.register_mcp_server("bench", SERVER)
            hitl: HumanInTheLoopMiddleware[Any, Any, Any] = HumanInTheLoopMiddleware(interrupt_on={})
            agent: Any = create_agent(
                OneCell(code=KERNEL_ROUND.format(calls=calls)),
                tools=tools,
                middleware=[hitl, CodeActionMiddleware(executor, human_in_the_loop=hitl)],
            )
            for _ in range(rounds):
                out = await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]})
                for name, seconds in json.loads(out["messages"][-1].text).items():
                    samples[name].append(seconds)
                samples["direct"].append(_direct(tools[0], calls))
    return samples


def main() -> None:
    args = arguments(__doc__, calls=200)
    samples = asyncio.run(measure(args.calls, args.rounds))
    median = report(samples, LABELS, args.calls, args.rounds)
    decision = (median["asked"] - median["ruled"]) * 1e3
    print(f"middleware's decision per call (asked - by rule): {decision:+.3f} ms")
    print(f"ratio agent tool (asked) / MCP tool: {median['asked'] / median['mcp']:.2f}")


if __name__ == "__main__":
    main()
