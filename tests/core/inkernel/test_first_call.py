"""Generated code builds a call's models before the call is answered (issue 25).

The models are built on first use (``defer_build``: importing a package with many tools stays
cheap). A result model's first use used to be the result's validation, right after the answer, and
the next call's argument model's first use that call: in a kernel whose calls are held for approval,
after the human approved. Now the result model is built before the call is sent, and while a call
that may be held waits, the models of the other imported tools are built. Real kernel, real test MCP
server. The code records, at the moment the answer arrives, which models are built (on the previous
code none is: the tests fail).
"""

from __future__ import annotations

from pathlib import Path

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import CodeExecutor, ExecutionResult
from servers import PYTHON, SERVE_SCRIPT
from servers.executors import executor_with_test_server

CODE = """\
import ipybox_core.inkernel.runtime as runtime
from mcptools.test import Stats, add, stats
from mcptools.test._tools.add import _Args as AddArgs

built_when_answered = []
real_call_tool = runtime.call_tool

def spy(*args):
    response = real_call_tool(*args)
    built_when_answered.append((Stats.__pydantic_complete__, AddArgs.__pydantic_complete__))
    return response

runtime.call_tool = spy
try:
    summary = stats(values=[1.0, 2.0, 6.0])
finally:
    runtime.call_tool = real_call_tool
print(built_when_answered, summary.mean)
"""


async def test_a_held_call_is_answered_with_its_result_model_and_the_next_calls_models_built(
    tmp_path: Path,
) -> None:
    async with executor_with_test_server(tmp_path) as executor:
        asked = []
        result = None
        async for event in executor.stream(CODE):
            if isinstance(event, ApprovalRequest):
                asked.append(event.tool)
                await event.accept()
            elif isinstance(event, ExecutionResult):
                result = event
        assert asked == ["stats"]
        assert result is not None and result.error is None, result
        assert result.text == "[(True, True)] 3.0\n", result.text


async def test_under_a_policy_that_never_asks_only_the_calls_own_models_are_built(tmp_path: Path) -> None:
    async with CodeExecutor(workspace=tmp_path, timeout=60, approval="never") as executor:
        await executor.register_mcp_server("test", {"command": PYTHON, "args": [str(SERVE_SCRIPT), "stdio"]})
        await executor.execute("from mcptools.test import stats; stats(values=[1.0])")  # learns: no marks
        result = await executor.execute(CODE)
        assert result.error is None, result
        assert result.text == "[(True, False)] 3.0\n", result.text  # nothing else while nobody is asked
