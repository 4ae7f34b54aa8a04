"""A run through the real ``OpenAIResponsesModel`` against respx-mocked HTTP (no network).

The installed ``openai`` client sends its requests with ``httpx2``, which respx does not patch. But
``AsyncOpenAI(http_client=...)`` still accepts a classic ``httpx.AsyncClient``: give it one whose
transport is ``httpx.MockTransport(router.async_handler)`` and a respx router answers every request
(no global patching). Another way that works: an ``httpx2.AsyncClient`` with an
``httpx2.MockTransport`` converting requests to ``httpx.Request`` for ``router.async_handler``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx
from agents import Agent, OpenAIResponsesModel, Runner
from openai import AsyncOpenAI

from ipybox_core import CodeExecutor
from ipybox_integrations.openai_agents import CodeActionTool

pytestmark = pytest.mark.asyncio(loop_scope="package")

BASE_URL = "https://llm.invalid/v1"
CODE = "from mcptools.test import add\nprint('sum:', add(a=19, b=23))"


def responses_body(response_id: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    """A Responses API ``response`` object as the server sends it."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "model": "gpt-test",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 100,
            "output_tokens": 20,
            "total_tokens": 120,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


async def test_openai_responses_model_over_mocked_http(idle_executor: CodeExecutor) -> None:
    router = respx.MockRouter(assert_all_called=True, assert_all_mocked=True)
    route = router.post(f"{BASE_URL}/responses").mock(
        side_effect=[
            httpx.Response(
                200,
                json=responses_body(
                    "resp_1",
                    [
                        {
                            "type": "function_call",
                            "id": "fc_1",
                            "call_id": "call_1",
                            "name": "execute_code",
                            "arguments": json.dumps({"code": CODE}),
                            "status": "completed",
                        }
                    ],
                ),
            ),
            httpx.Response(
                200,
                json=responses_body(
                    "resp_2",
                    [
                        {
                            "type": "message",
                            "id": "msg_1",
                            "role": "assistant",
                            "status": "completed",
                            "content": [{"type": "output_text", "text": "It is 42.", "annotations": []}],
                        }
                    ],
                ),
            ),
        ]
    )
    http_client = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
    client = AsyncOpenAI(
        api_key="sk-test-not-a-key", base_url=BASE_URL, http_client=http_client, max_retries=0
    )
    code = CodeActionTool(idle_executor)
    agent = Agent(
        name="analyst",
        instructions=code.instructions("You are a data analyst."),
        tools=[code.tool],
        model=OpenAIResponsesModel(model="gpt-test", openai_client=client),
    )

    result = await Runner.run(agent, "What is 19 + 23?")
    [item] = result.interruptions
    assert (item.tool_namespace, item.tool_name, json.loads(item.arguments or "")) == (
        "test",
        "add",
        {"a": 19, "b": 23},
    )
    assert route.call_count == 1
    state = result.to_state()
    state.approve(item)
    result = await Runner.run(agent, state)
    await client.close()

    assert result.final_output == "It is 42."
    first, second = (json.loads(call.request.content) for call in route.calls)
    assert first["model"] == "gpt-test"
    assert first["instructions"].startswith("You are a data analyst.")
    assert "def add(" in first["instructions"]
    assert [tool["name"] for tool in first["tools"]] == ["execute_code"]
    assert first["tools"][0]["parameters"]["required"] == ["code"]
    outputs = [entry for entry in second["input"] if entry.get("type") == "function_call_output"]
    assert outputs == [{"type": "function_call_output", "call_id": "call_1", "output": "sum: 42"}]
    assert route.calls[0].request.headers["authorization"] == "Bearer sk-test-not-a-key"
