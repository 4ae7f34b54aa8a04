"""The same flows through PydanticAI's real OpenAI models, with the HTTP API mocked by respx.

The openai SDK (3.x) sends requests with ``httpx2``, which respx does not patch (respx mocks
``httpx``). So the provider gets an ``httpx2.AsyncClient`` whose ``MockTransport`` hands each
request to a respx router (converted to an ``httpx.Request``) and converts the router's response
back: routes, side effects and recorded calls are plain respx. Everything else — the SDK, request
building, response parsing, SSE streaming — is the real code.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx2
import pytest
import respx
from pai_kit import returns_of, stream_run, text_of
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from ipybox_core import CodeExecutor
from ipybox_integrations.pydantic_ai import ApprovalRequested, CodeAction, approval_results, pending_approvals

pytestmark = pytest.mark.asyncio(loop_scope="package")

BASE_URL = "https://api.openai.test/v1"
ONE_PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
CODE = f"""\
import base64
from IPython.display import Image, display
from mcptools.test import add
first = add(a=20, b=1)
print(add(a=first, b=21))
display(Image(data=base64.b64decode("{ONE_PIXEL_PNG}")))
"""
USAGE_CHAT = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
USAGE_RESPONSES = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


def respx_transport(router: respx.MockRouter) -> httpx2.MockTransport:
    """An httpx2 transport answering from a respx router."""

    async def handle(request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        mirrored = httpx.Request(
            request.method, str(request.url), headers=request.headers.multi_items(), content=body
        )
        response = await router.async_handler(mirrored)
        content = await response.aread()
        return httpx2.Response(response.status_code, headers=response.headers.multi_items(), content=content)

    return httpx2.MockTransport(handle)


def provider_for(router: respx.MockRouter) -> OpenAIProvider:
    client = httpx2.AsyncClient(transport=respx_transport(router))
    return OpenAIProvider(base_url=BASE_URL, api_key="sk-test", http_client=client)


def chat_call(code: str) -> dict[str, Any]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "execute_code", "arguments": json.dumps({"code": code})},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return chat_completion(message, "tool_calls")


def chat_text(text: str) -> dict[str, Any]:
    return chat_completion({"role": "assistant", "content": text}, "stop")


def chat_completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    choice = {"index": 0, "finish_reason": finish_reason, "message": message}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [choice],
        "usage": USAGE_CHAT,
    }


def responses_call(code: str) -> dict[str, Any]:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "execute_code",
        "arguments": json.dumps({"code": code}),
        "status": "completed",
    }
    return response_with([item])


def responses_text(text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return response_with(
        [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": content}]
    )


def response_with(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-4o", "status": "completed",
        "output": output, "usage": USAGE_RESPONSES, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    }  # fmt: skip


def sse(*chunks: dict[str, Any]) -> httpx.Response:
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})


def chat_chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [choice],
    }


def request_json(route: respx.Route, index: int) -> dict[str, Any]:
    return json.loads(route.calls[index].request.content)  # type: ignore[no-any-return]


async def test_chat_model_deferred_rounds_tool_text_and_image(executor: CodeExecutor) -> None:
    router = respx.MockRouter(base_url=BASE_URL, assert_all_mocked=True)
    route = router.post("/chat/completions").mock(
        side_effect=[
            httpx.Response(200, json=chat_call(CODE)),
            httpx.Response(200, json=chat_text("It is 42.")),
        ]
    )
    model = OpenAIChatModel("gpt-4o", provider=provider_for(router))
    agent = Agent(model, capabilities=[CodeAction(executor)], output_type=[str, DeferredToolRequests])

    result = await agent.run("What is 20 + 1 + 21?")
    rounds = []
    while isinstance(result.output, DeferredToolRequests):
        assert route.call_count == 1
        rounds.extend((a.name, a.args) for a in pending_approvals(result.output))
        answer = approval_results(result.output, lambda a: True)
        result = await agent.run(message_history=result.all_messages(), deferred_tool_results=answer)

    assert rounds == [("test.add", {"a": 20, "b": 1}), ("test.add", {"a": 21, "b": 21})]
    assert result.output == "It is 42."
    assert route.call_count == 2
    first = request_json(route, 0)
    assert [tool["function"]["name"] for tool in first["tools"]] == ["execute_code"]
    system = first["messages"][0]
    assert system["role"] == "system"
    assert executor.api_reference().strip() in system["content"]
    messages = request_json(route, 1)["messages"]
    (tool_message,) = [m for m in messages if m["role"] == "tool"]
    assert tool_message["tool_call_id"] == "call_1"
    assert "42" in json.dumps(tool_message["content"])
    image_urls = [
        part["image_url"]["url"]
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]
    assert [url[:22] for url in image_urls] == ["data:image/png;base64,"]


async def test_responses_model_inline_approvals(executor: CodeExecutor) -> None:
    router = respx.MockRouter(base_url=BASE_URL, assert_all_mocked=True)
    route = router.post("/responses").mock(
        side_effect=[
            httpx.Response(200, json=responses_call(CODE)),
            httpx.Response(200, json=responses_text("42")),
        ]
    )
    seen: list[str] = []

    def handler(ctx: Any, requests: DeferredToolRequests) -> Any:
        seen.extend(f"{call.tool_name}{call.args}" for call in requests.approvals)
        return approval_results(requests, lambda a: True)

    model = OpenAIResponsesModel("gpt-4o", provider=provider_for(router))
    agent = Agent(model, capabilities=[CodeAction(executor), HandleDeferredToolCalls(handler=handler)])
    result = await agent.run("What is 20 + 1 + 21?")

    assert result.output == "42"
    assert seen == ["add{'a': 20, 'b': 1}", "add{'a': 21, 'b': 21}"]
    assert route.call_count == 2
    first = request_json(route, 0)
    assert executor.api_reference().strip() in first["instructions"]
    assert [tool["name"] for tool in first["tools"]] == ["execute_code"]
    (output,) = [
        item for item in request_json(route, 1)["input"] if item.get("type") == "function_call_output"
    ]
    assert output["call_id"] == "call_1"
    assert "42" in json.dumps(output["output"])
    assert "data:image/png;base64," in json.dumps(request_json(route, 1)["input"])


async def test_streamed_chat_model_shows_approval_events(executor: CodeExecutor) -> None:
    code = "from mcptools.test import add\nprint(add(a=2, b=3))"
    call_delta = {
        "role": "assistant",
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "execute_code", "arguments": json.dumps({"code": code})},
            }
        ],
    }
    router = respx.MockRouter(base_url=BASE_URL, assert_all_mocked=True)
    route = router.post("/chat/completions").mock(
        side_effect=[
            sse(chat_chunk(call_delta), chat_chunk({}, "tool_calls")),
            sse(chat_chunk({"role": "assistant", "content": "five"}), chat_chunk({}, "stop")),
        ]
    )
    model = OpenAIChatModel("gpt-4o", provider=provider_for(router))
    agent = Agent(
        model,
        capabilities=[
            CodeAction(executor),
            HandleDeferredToolCalls(handler=lambda ctx, requests: approval_results(requests, lambda a: True)),
        ],
    )
    events, result = await stream_run(agent, "2 + 3?")
    assert [e.approval.name for e in events if isinstance(e, ApprovalRequested)] == ["test.add"]
    assert result.output == "five"
    assert [text_of(part) for part in returns_of(result)] == ["5"]
    assert request_json(route, 0)["stream"] is True
