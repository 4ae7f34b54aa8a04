"""Generated code builds a structured result's model before it sends the call (issue 25).

The models are built on first use (``defer_build``: importing a package with many tools stays
cheap). The result model's first use used to be the result's validation, right after the answer: in
a kernel whose first call was held for approval, after the human approved. Real kernel, real test
MCP server, approval asked for every call. The code records, at the moment the answer arrives,
whether the result model is built (on the previous code it is not: the test fails).
"""

from __future__ import annotations

from pathlib import Path

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import ExecutionResult
from servers.executors import executor_with_test_server

CODE = """\
import ipybox_core.inkernel.runtime as runtime
from mcptools.test import Stats, stats

built_when_answered = []
real_call_tool = runtime.call_tool

def spy(*args):
    response = real_call_tool(*args)
    built_when_answered.append(Stats.__pydantic_complete__)
    return response

runtime.call_tool = spy
try:
    summary = stats(values=[1.0, 2.0, 6.0])
finally:
    runtime.call_tool = real_call_tool
print(built_when_answered, summary.mean)
"""


async def test_the_result_model_is_built_before_the_call_is_answered(tmp_path: Path) -> None:
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
        assert result.text == "[True] 3.0\n", result.text
