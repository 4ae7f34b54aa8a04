"""Offline LangChain test kit: a scripted chat model that supports ``bind_tools``, and run helpers.

None of langchain_core's fake chat models implement ``bind_tools`` (``create_agent`` needs it), so
:class:`ScriptedChatModel` subclasses ``BaseChatModel``. It answers from a ``script(messages)``
callable, so its answers depend on the conversation, not on how often it was called (an interrupted
run is resumed, not repeated).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Interrupt
from pydantic import Field

Script = Callable[[list[BaseMessage]], AIMessage]

APPROVE: dict[str, Any] = {"decisions": [{"type": "approve"}]}


def reject(message: str) -> dict[str, Any]:
    return {"decisions": [{"type": "reject", "message": message}]}


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answers come from ``script``; records what it was sent and bound."""

    script: Script
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.script(list(messages)))])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return self._generate(messages)

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[Any, Any]:
        self.bound_tools = [convert_to_openai_tool(tool) for tool in tools]
        return self


def tool_call(code: str, call_id: str = "call_1") -> dict[str, Any]:
    return {"name": "execute_code", "args": {"code": code}, "id": call_id, "type": "tool_call"}


def run_code_then_finish(*codes: str) -> Script:
    """On a human turn: one execute_code call per code (parallel calls); after tool results: 'done'."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].type == "tool":
            return AIMessage(content="done")
        turn = sum(1 for message in messages if message.type == "human")
        calls = [tool_call(code, f"call_{turn}_{n}") for n, code in enumerate(codes)]
        return AIMessage(content="", tool_calls=calls)

    return script


def make_agent(
    middleware: Sequence[AgentMiddleware[Any, Any, Any]],
    script: Script,
    *,
    checkpointer: InMemorySaver | None = None,
    system_prompt: str | None = None,
) -> tuple[ScriptedChatModel, Any]:
    model = ScriptedChatModel(script=script)
    agent = create_agent(
        model,
        tools=[],
        system_prompt=system_prompt,
        middleware=list(middleware),
        checkpointer=checkpointer if checkpointer is not None else InMemorySaver(),
    )
    return model, agent


def config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def user(text: str = "go") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def only_interrupt(output: Any) -> Interrupt:
    """The single interrupt of a ``version="v2"`` run's output."""
    assert len(output.interrupts) == 1, output.interrupts
    interrupt: Interrupt = output.interrupts[0]
    return interrupt


def action(interrupt: Interrupt) -> dict[str, Any]:
    """The one action request of a HITLRequest interrupt."""
    value = interrupt.value
    assert set(value) == {"action_requests", "review_configs"}, value
    assert len(value["action_requests"]) == 1 and len(value["review_configs"]) == 1
    request: dict[str, Any] = value["action_requests"][0]
    return request


async def resume(agent: Any, thread_id: str, answer: Any) -> Any:
    return await agent.ainvoke(Command(resume=answer), config(thread_id), version="v2")


def tool_messages(state_values: dict[str, Any]) -> list[ToolMessage]:
    return [message for message in state_values["messages"] if isinstance(message, ToolMessage)]


def text_of(message: ToolMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(block.get("text", "") for block in message.content if isinstance(block, dict))


class ToolRuns(AsyncCallbackHandler):
    """Records every tool run: name, parent, inputs, output or error."""

    def __init__(self) -> None:
        self.runs: dict[UUID, dict[str, Any]] = {}

    async def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self.runs[run_id] = {
            "name": serialized.get("name"),
            "parent": parent_run_id,
            "inputs": kwargs.get("inputs"),
        }

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.runs[run_id]["output"] = output

    async def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.runs[run_id]["error"] = type(error).__name__

    def named(self, name: str) -> list[dict[str, Any]]:
        return [run for run in self.runs.values() if run["name"] == name]
