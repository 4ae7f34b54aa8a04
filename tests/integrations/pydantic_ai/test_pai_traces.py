"""Traces of PydanticAI's ``Instrumentation``: each MCP call of the code is one ``execute_tool`` span
with the MCP tool's result, under the ``execute_code`` span, as a native tool call would be."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pai_kit import ScriptedModel, roundtrip
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.capabilities import HandleDeferredToolCalls, Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings

from ipybox_core import CodeExecutor
from ipybox_integrations.pydantic_ai import CodeAction

pytestmark = pytest.mark.asyncio(loop_scope="package")

CODE = "from mcptools.test import add, echo\nprint(add(a=1, b=2), echo(message='hi'))"


def traced_agent(executor: CodeExecutor, *, inline: bool) -> tuple[Agent[None, object], InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    capabilities: list[Any] = [
        CodeAction(executor),
        Instrumentation(InstrumentationSettings(tracer_provider=provider)),
    ]
    if inline:
        capabilities.append(
            HandleDeferredToolCalls(handler=lambda _, requests: requests.build_results(approve_all=True))
        )
    agent = Agent(
        ScriptedModel([CODE]).model, capabilities=capabilities, output_type=[str, DeferredToolRequests]
    )
    return agent, exporter


def tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name.startswith("execute_tool ")]


def attribute(span: ReadableSpan, name: str) -> Any:
    return (span.attributes or {}).get(name)


def assert_one_span_per_mcp_call_under_execute_code(spans: list[ReadableSpan]) -> None:
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    assert sorted(by_name) == ["execute_tool add", "execute_tool echo", "execute_tool execute_code"], by_name
    assert all(len(group) == 1 for group in by_name.values()), by_name  # no span for a deferral
    (add,), (echo,) = by_name["execute_tool add"], by_name["execute_tool echo"]
    assert json.loads(attribute(add, "gen_ai.tool.call.result")) == {"result": 3}  # the MCP result
    assert attribute(echo, "gen_ai.tool.call.result") == "hi"
    assert json.loads(attribute(add, "gen_ai.tool.call.arguments")) == {"a": 1, "b": 2}


async def test_inline_approved_calls_are_spans_with_their_results_under_execute_code(
    executor: CodeExecutor,
) -> None:
    agent, exporter = traced_agent(executor, inline=True)
    result = await agent.run("go")
    assert result.output == "done: 3 hi"
    spans = tool_spans(exporter)
    assert_one_span_per_mcp_call_under_execute_code(spans)
    (execute_code,) = [span for span in spans if span.name == "execute_tool execute_code"]
    assert execute_code.context is not None
    for span in spans:
        if span is not execute_code:
            assert span.parent is not None and span.parent.span_id == execute_code.context.span_id


async def test_deferred_calls_are_one_span_each_once_approved(executor: CodeExecutor) -> None:
    agent, exporter = traced_agent(executor, inline=False)
    result = await agent.run("go")
    while isinstance(result.output, DeferredToolRequests):
        answers = result.output.build_results(approve_all=True)
        result = await agent.run(
            message_history=roundtrip(result.all_messages()), deferred_tool_results=answers
        )
    assert result.output == "done: 3 hi"
    spans = tool_spans(exporter)
    held = {span.name: span for span in spans if span.name != "execute_tool execute_code"}
    assert sorted(held) == ["execute_tool add", "execute_tool echo"]  # no span for either deferral
    assert len(spans) - len(held) == 3  # execute_code runs once per round: asked, asked, done
    assert json.loads(attribute(held["execute_tool add"], "gen_ai.tool.call.result")) == {"result": 3}
    assert attribute(held["execute_tool echo"], "gen_ai.tool.call.result") == "hi"
