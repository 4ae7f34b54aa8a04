"""A FastAPI app whose LangChain agent acts by writing Python on ``ipybox serve``; people approve over HTTP.

    uvicorn fastapi_app:app --workers 2 --port 8000   # with ipybox serve running (docs/recipes/fastapi.md)

Needs ``pip install -e '.[langchain]' fastapi uvicorn langgraph-checkpoint-sqlite`` (in the ipybox
checkout) and a chat model's package (``langchain-openai`` for the default). Every worker enters
one ``RemoteSessions`` (kernels, MCP servers and waiting approvals live in the service) and one
``AsyncSqliteSaver`` on a file the workers share, so an approval asked in one worker is answered by
whichever takes ``/approve``. ``/approvals`` is the service's approvals inbox: what waits across
all threads, answered from there.

Settings, from the environment: ``IPYBOX_URL`` (the service, default
``http://127.0.0.1:8765/mcp``), ``IPYBOX_MCP_TOKEN`` (its token), ``CHECKPOINTS`` (the SQLite file,
default ``checkpoints.sqlite``), ``CHAT_MODEL`` (a LangChain model string, default
``openai:gpt-4.1-mini``; ``chat_model()`` is the one place that builds the model).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command
from pydantic import BaseModel

from ipybox_core.errors import ApprovalError
from ipybox_core.remote import ExecutionGone, RemoteSessions, ServiceError, WaitingApproval
from ipybox_integrations.langchain import CodeActionMiddleware

IPYBOX_URL = os.environ.get("IPYBOX_URL", "http://127.0.0.1:8765/mcp")
CHECKPOINTS = os.environ.get("CHECKPOINTS", "checkpoints.sqlite")


def chat_model() -> BaseChatModel:
    """The agent's model: any LangChain chat model ("openai:gpt-4.1-mini", "anthropic:claude-sonnet-4-5")."""
    return init_chat_model(os.environ.get("CHAT_MODEL", "openai:gpt-4.1-mini"))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Per worker: one client of the service and one checkpointer, for every request of the worker."""
    async with (
        RemoteSessions(IPYBOX_URL, wait_for_service=60) as sessions,  # token: $IPYBOX_MCP_TOKEN
        AsyncSqliteSaver.from_conn_string(CHECKPOINTS) as checkpointer,
    ):
        app.state.sessions = sessions
        app.state.agent = create_agent(
            chat_model(),
            system_prompt="You help the customers of a small shop.",
            middleware=[CodeActionMiddleware(sessions)],  # a kernel per thread_id, in the service
            checkpointer=checkpointer,
        )
        yield


app = FastAPI(lifespan=lifespan)


@app.exception_handler(ServiceError)
async def service_unavailable(request: Request, error: ServiceError) -> JSONResponse:
    """The service is down or restarting: this request fails, the worker keeps serving."""
    return JSONResponse({"detail": str(error)}, status_code=503)


class ChatIn(BaseModel):
    thread_id: str  # one conversation: one kernel in the service, one thread in the checkpoints
    message: str


class DecisionIn(BaseModel):
    thread_id: str
    interrupt_id: str  # from the reply's "pending"
    approve: bool
    reason: str = ""  # told to the code (PermissionError) when rejected


class AnswerIn(BaseModel):
    approve: bool
    reason: str = ""


class Pending(BaseModel):
    interrupt_id: str
    tool: str  # "server.tool", e.g. "shop.place_order"
    args: dict[str, Any]
    description: str


class Reply(BaseModel):
    reply: str | None  # the agent's answer, once nothing waits
    pending: list[Pending]  # MCP calls of the agent's code that wait for a decision


def thread(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def waiting(interrupts: Any) -> list[Pending]:
    """The decisions the thread waits for: one per MCP call (the middleware's HITLRequests)."""
    return [
        Pending(
            interrupt_id=interrupt.id,
            tool=action["name"],
            args=action["args"],
            description=action["description"],
        )
        for interrupt in interrupts
        for action in interrupt.value["action_requests"]
    ]


def reply(out: Any) -> Reply:
    pending = waiting(out.interrupts)
    return Reply(reply=None if pending else out.value["messages"][-1].text, pending=pending)


@app.post("/chat")
async def chat(body: ChatIn, request: Request) -> Reply:
    message = {"messages": [{"role": "user", "content": body.message}]}
    out = await request.app.state.agent.ainvoke(message, thread(body.thread_id), version="v2")
    return reply(out)


@app.get("/threads/{thread_id}/pending")
async def pending(thread_id: str, request: Request) -> list[Pending]:
    """What the thread waits for (from the checkpoints: any worker answers, after any restart)."""
    return waiting((await request.app.state.agent.aget_state(thread(thread_id))).interrupts)


@app.post("/approve")
async def approve(body: DecisionIn, request: Request) -> Reply:
    """Answer one pending call; the code goes on in the same kernel, in whichever worker this is."""
    state = await request.app.state.agent.aget_state(thread(body.thread_id))
    if body.interrupt_id not in [interrupt.id for interrupt in state.interrupts]:
        raise HTTPException(404, f"thread {body.thread_id!r} does not wait for {body.interrupt_id!r}")
    decision = (
        {"type": "approve"} if body.approve else {"type": "reject", "message": body.reason or "rejected"}
    )
    resume: Command[Any] = Command(resume={body.interrupt_id: {"decisions": [decision]}})
    out = await request.app.state.agent.ainvoke(resume, thread(body.thread_id), version="v2")
    return reply(out)


@app.get("/approvals")
async def approvals(request: Request, thread_id: str | None = None) -> list[WaitingApproval]:
    """The approvals inbox: every MCP call that waits in the service, across threads (or one thread's),
    oldest first, with who asked and since when."""
    sessions: RemoteSessions = request.app.state.sessions
    return await sessions.waiting_approvals(thread_id)


@app.post("/approvals/{approval_id}")
async def answer(approval_id: str, body: AnswerIn, request: Request) -> Reply:
    """Answer from the inbox, then let the thread's agent go on with the outcome."""
    sessions: RemoteSessions = request.app.state.sessions
    waiting = {approval.id: approval for approval in await sessions.waiting_approvals()}
    if approval_id not in waiting:
        raise HTTPException(404, f"no approval {approval_id!r} waits")
    try:
        await sessions.answer_approval(approval_id, approve=body.approve, reason=body.reason or None)
    except (ApprovalError, ExecutionGone) as error:  # answered meanwhile, or no longer waiting
        raise HTTPException(409, str(error)) from None
    # resumed without an answer, the middleware picks the call up in the service: it has the outcome
    out = await request.app.state.agent.ainvoke(None, thread(waiting[approval_id].conversation), version="v2")
    return reply(out)
