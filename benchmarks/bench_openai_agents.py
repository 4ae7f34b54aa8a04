"""OpenAI Agents SDK adapter: the cost of routing each MCP approval through the SDK's interruptions.

Run: ``.venv/bin/python benchmarks/bench_openai_agents.py [--calls 20] [--repeat 5]``. Every figure is
measured in this run, on one executor with the test MCP server.

One code block makes ``--calls`` MCP calls that each need approval. Baseline: the executor alone
(``ex.stream()``, accepting each ``ApprovalRequest``). Adapter: ``CodeActionTool`` in an agent run
driven by a scripted model, every call an interruption approved with ``state.approve()`` and resumed
with ``Runner.run(agent, state)``; and once more with a JSON round trip of the ``RunState`` per
approval. Reported: median wall time per block, per-approval overhead and the ratio to the baseline.

Then the same with ``--tools`` more MCP tools registered (a synthetic server): the kernel agent has
one proxy tool per MCP tool, and the SDK's run-state bookkeeping on each resume grows with the
number of tools of the agents involved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agents import Agent, Runner, RunState, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import CodeExecutor
from ipybox_integrations.openai_agents import CodeActionTool

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from servers import PYTHON, SERVE_SCRIPT

#: Arguments for a seconds-long run that only checks the benchmark still works (tests/test_benchmarks.py).
TINY_ARGS = ["--calls", "2", "--repeat", "1", "--tools", "3"]


def block(calls: int) -> str:
    loop = f"for i in range({calls}):\n    total = add(a=total, b=i)\n"
    return f"from mcptools.test import add\ntotal = 0\n{loop}print(total)"


async def baseline(executor: CodeExecutor, code: str) -> float:
    start = time.perf_counter()
    async for event in executor.stream(code):
        if isinstance(event, ApprovalRequest):
            await event.accept()
    return time.perf_counter() - start


async def adapter(executor: CodeExecutor, code: str, *, json_round_trip: bool) -> float:
    tool = CodeActionTool(executor)
    model = ScriptedModel(
        [[function_call("execute_code", {"code": code}, call_id="c1")], [assistant_message("ok")]]
    )
    agent: Agent[Any] = Agent(name="bench", instructions=tool.instructions(), tools=[tool.tool], model=model)
    start = time.perf_counter()
    result = await Runner.run(agent, "go")
    while result.interruptions:
        state = result.to_state()
        if json_round_trip:
            state = await RunState.from_json(agent, json.loads(json.dumps(state.to_json())))
        for item in state.get_interruptions():
            state.approve(item)
        result = await Runner.run(agent, state)
    return time.perf_counter() - start


SYNTHETIC_SERVER = """\
import sys
from mcp.server import MCPServer

mcp = MCPServer("synthetic")
for number in range(int(sys.argv[1])):
    def tool(a: int, b: int) -> int:
        return a + b
    tool.__name__ = f"tool_{number}"
    tool.__doc__ = f"Synthetic tool {number}."
    mcp.tool()(tool)
mcp.run()
"""


async def measure(executor: CodeExecutor, code: str, repeat: int) -> dict[str, list[float]]:
    await baseline(executor, code)  # warm up: imports, connections
    runs: dict[str, list[float]] = {"executor.stream": [], "CodeActionTool": [], "+ JSON RunState": []}
    for _ in range(repeat):
        runs["executor.stream"].append(await baseline(executor, code))
        runs["CodeActionTool"].append(await adapter(executor, code, json_round_trip=False))
        runs["+ JSON RunState"].append(await adapter(executor, code, json_round_trip=True))
    return runs


def report(title: str, runs: dict[str, list[float]], calls: int) -> None:
    base = statistics.median(runs["executor.stream"])
    print(title)
    for name, times in runs.items():
        median = statistics.median(times)
        per_call = (median - base) / calls * 1000
        print(f"  {name:17} {median * 1000:8.1f} ms   x{median / base:5.2f}   +{per_call:6.2f} ms/approval")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tools", type=int, default=200, help="synthetic MCP tools for the second table")
    args = parser.parse_args()
    set_tracing_disabled(True)
    code = block(args.calls)
    with tempfile.TemporaryDirectory() as workspace:
        async with CodeExecutor(workspace=workspace) as executor:
            await executor.register_mcp_server(
                "test", {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]}
            )
            tools = sum(len(server.package.tools) for server in executor.servers.values())
            first = await measure(executor, code, args.repeat)
            script = Path(workspace) / "synthetic_server.py"
            script.write_text(SYNTHETIC_SERVER)
            synthetic = {"command": PYTHON, "args": [str(script), str(args.tools)]}
            await executor.register_mcp_server("synthetic", synthetic)
            second = await measure(executor, code, args.repeat)
    title = f"{args.calls} approved MCP calls in one code block, median of {args.repeat} runs"
    report(f"{title}, {tools} MCP tools registered", first, args.calls)
    report(f"{title}, {tools + args.tools} MCP tools registered", second, args.calls)


if __name__ == "__main__":
    asyncio.run(main())
