"""The nested kernel run follows the outer run's tracing settings (recorded in memory, never exported)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agents import RunConfig, set_trace_processors, set_tracing_disabled
from agents.tracing import Span, Trace, TracingProcessor
from oa_kit import make_agent, run_to_end, scripted, tool_outputs

from ipybox_core import CodeExecutor
from ipybox_integrations.openai_agents import CodeActionTool

pytestmark = pytest.mark.asyncio(loop_scope="package")


class Recorder(TracingProcessor):
    def __init__(self) -> None:
        self.traces: list[str] = []
        self.spans: list[tuple[str, str]] = []
        self.function_spans: dict[str, Any] = {}

    def on_trace_start(self, trace: Trace) -> None:
        self.traces.append(trace.name)

    def on_trace_end(self, trace: Trace) -> None:
        pass

    def on_span_start(self, span: Span[Any]) -> None:
        pass

    def on_span_end(self, span: Span[Any]) -> None:
        self.spans.append((span.trace_id, span.span_data.type))
        if span.span_data.type == "function":
            data = span.span_data
            self.function_spans[data.name] = (data.input, data.output) if data.input or data.output else None

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    """Tracing on, into memory only (the exporting default processor is replaced)."""
    recorder = Recorder()
    set_trace_processors([recorder])
    set_tracing_disabled(False)
    yield recorder
    set_tracing_disabled(True)
    set_trace_processors([])


async def test_a_run_without_tracing_traces_nothing(idle_executor: CodeExecutor, recorder: Recorder) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted("from mcptools.test import add\nprint(add(a=2, b=2))")
    await run_to_end(make_agent(code, model), run_config=RunConfig(tracing_disabled=True))
    assert tool_outputs(model) == ["4"]
    assert recorder.traces == [] and recorder.spans == []


async def test_the_nested_run_is_part_of_the_outer_trace(
    idle_executor: CodeExecutor, recorder: Recorder
) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted("print('traced')")
    await run_to_end(make_agent(code, model), run_config=RunConfig(workflow_name="outer workflow"))
    assert recorder.traces == ["outer workflow"]
    assert len({trace_id for trace_id, _ in recorder.spans}) == 1
    assert [kind for _, kind in recorder.spans].count("agent") == 2  # the outer agent and the kernel agent


async def test_sensitive_data_stays_out_of_nested_spans_when_the_outer_run_says_so(
    idle_executor: CodeExecutor, recorder: Recorder
) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted("from mcptools.test import echo\nprint(echo(message='secret-argument'))")
    await run_to_end(make_agent(code, model), run_config=RunConfig(trace_include_sensitive_data=False))
    assert tool_outputs(model) == ["secret-argument"]
    assert "test.echo" in recorder.function_spans  # the proxy span, named by its qualified name
    assert all(data is None for data in recorder.function_spans.values())


async def test_a_proxy_span_carries_the_mcp_result_not_approved(
    idle_executor: CodeExecutor, recorder: Recorder
) -> None:
    code = CodeActionTool(idle_executor)
    model = scripted(
        "from mcptools.test import add, echo\nprint(add(a=2, b=2), echo(message='traced-result'))"
    )
    await run_to_end(make_agent(code, model))
    assert tool_outputs(model) == ["4 traced-result"]
    assert recorder.function_spans["test.add"][1] == '{"result": 4}'  # the MCP tool's structured result
    assert recorder.function_spans["test.echo"][1] == "traced-result"
