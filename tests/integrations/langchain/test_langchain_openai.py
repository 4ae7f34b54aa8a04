"""One agent run through langchain-openai's ChatOpenAI (Responses API) against mocked OpenAI HTTP.

The installed ``openai`` client sends requests with ``httpx2``, which respx does not patch. It still
accepts a classic ``httpx.AsyncClient`` as ``http_async_client``, and respx mocks that one.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
import respx
from langchain.agents import create_agent
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from lc_kit import APPROVE, action, config, only_interrupt, resume, user

from ipybox_core import CodeExecutor
from ipybox_integrations.langchain import CodeActionMiddleware
from servers.tools import solid_png

pytestmark = pytest.mark.asyncio(loop_scope="package")

PNG = solid_png(2, 2, (255, 0, 0))
CODE = (
    "import base64\nfrom IPython.display import Image, display\nfrom mcptools.test import add\n"
    f"print('sum', add(a=20, b=22))\ndisplay(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))"
)


def response(output: list[dict[str, Any]], number: int) -> dict[str, Any]:
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": 1_700_000_000,
        "model": "gpt-test",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    }


FUNCTION_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_oa",
    "name": "execute_code",
    "arguments": json.dumps({"code": CODE}),
    "status": "completed",
}
FINAL_MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "The sum is 42.", "annotations": []}],
}


async def test_chat_openai_agent_with_an_approved_mcp_call_and_an_image(idle_executor: CodeExecutor) -> None:
    bodies: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        output = [FUNCTION_CALL] if len(bodies) == 1 else [FINAL_MESSAGE]
        return httpx.Response(200, json=response(output, len(bodies)))

    async with httpx.AsyncClient() as http_client:
        model = ChatOpenAI(
            model="gpt-test",
            api_key="sk-test",
            base_url="https://api.openai.test/v1",
            use_responses_api=True,
            http_async_client=http_client,
            max_retries=0,
        )
        agent = create_agent(
            model,
            system_prompt="You run a shop.",
            middleware=[CodeActionMiddleware(idle_executor)],
            checkpointer=InMemorySaver(),
        )
        with respx.mock(assert_all_called=True) as mock:
            mock.post("https://api.openai.test/v1/responses").mock(side_effect=answer)
            out = await agent.ainvoke(user("what is 20 + 22?"), config("openai"), version="v2")
            assert action(only_interrupt(out))["args"] == {"a": 20, "b": 22}
            out = await resume(agent, "openai", APPROVE)

    assert out.value["messages"][-1].text == "The sum is 42."
    first, second = bodies
    (tool,) = first["tools"]
    assert tool["name"] == "execute_code" and list(tool["parameters"]["properties"]) == ["code"]
    instructions = json.dumps(first["input"][0])
    assert "You run a shop." in instructions and "## Code execution" in instructions
    (output,) = [item for item in second["input"] if item.get("type") == "function_call_output"]
    assert output["call_id"] == "call_oa"
    text, image = output["output"]
    assert text["type"] == "input_text" and text["text"] == "sum 42"
    assert image["type"] == "input_image"
    assert image["image_url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
