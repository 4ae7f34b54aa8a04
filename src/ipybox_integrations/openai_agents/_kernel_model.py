"""The hidden kernel agent's :class:`~agents.Model`: no LLM, it runs the code until its next stop."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agents import Handoff, Model, ModelResponse, ModelSettings, ModelTracing, Tool, TResponseInputItem, Usage
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseStreamEvent
from openai.types.responses import Response, ResponseCompletedEvent
from openai.types.responses.response_prompt_param import ResponsePromptParam

from ipybox_integrations.openai_agents._driver import KernelDriver

MODEL_NAME = "ipybox-kernel"


class KernelModel(Model):
    """Each "generation" continues the code: a function call per MCP call to approve, then the output."""

    def __init__(self, driver: KernelDriver) -> None:
        self._driver = driver

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        return ModelResponse(output=await self._driver.step(input), usage=Usage(), response_id=None)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        output = await self._driver.step(input)
        response = Response(
            id=MODEL_NAME,
            created_at=0,
            model=MODEL_NAME,
            object="response",
            output=output,
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=False,
            status="completed",
        )
        yield ResponseCompletedEvent(type="response.completed", sequence_number=0, response=response)
