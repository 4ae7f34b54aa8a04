"""An MCP server's question during a call of the code, as a LangGraph interrupt
(``CodeActionMiddleware(elicitation=True)``).

The interrupt's value is ``{"elicitation": {...}}`` (:class:`ElicitationQuestion`: the server, the
tool, its message and either the form's JSON ``schema`` or, in URL mode, the ``url``; ``error``
when the last answer's content broke the schema); the resume value is an
:class:`ElicitationResponse`: ``{"action": "accept", "content": {...}}``, ``{"action": "decline"}``
or ``{"action": "cancel"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from ipybox_core.mcp.elicitation import ElicitationContentError, ElicitationError, ElicitationRequest
from ipybox_integrations._questions import asked_question

NOT_ASKED = (
    "this agent's application does not put MCP servers' questions to its user "
    "(CodeActionMiddleware(elicitation=True) in a graph with a checkpointer does)"
)
"""Why a question is declined when the tool does not ask (told to the code on its stderr)."""


class ElicitationResponse(TypedDict):
    """The answer to an ``elicitation`` interrupt (``Command(resume=...)``)."""

    action: Literal["accept", "decline", "cancel"]
    content: NotRequired[dict[str, Any]]
    """The form's values (``accept`` only); properties left out get the schema's defaults."""


def question_value(question: ElicitationRequest, call_id: str, error: str | None = None) -> dict[str, Any]:
    """The interrupt value that puts ``question`` to the user."""
    return {"elicitation": asked_question(question, call_id, error)}


def asks_question(shown: object, question: ElicitationRequest) -> bool:
    """True when ``shown`` (an interrupt value) put ``question`` to the user."""
    asked = shown.get("elicitation") if isinstance(shown, Mapping) else None
    if not isinstance(asked, Mapping):
        return False
    return (asked.get("server"), asked.get("tool"), asked.get("message"), asked.get("url")) == (
        question.server,
        question.tool,
        question.message,
        question.url,
    ) and (question.url is not None or asked.get("schema") == dict(question.schema))


def is_question(value: object) -> bool:
    """True for an interrupt value that puts an MCP server's question."""
    return isinstance(value, Mapping) and isinstance(value.get("elicitation"), Mapping)


async def answer_question(question: ElicitationRequest, response: ElicitationResponse) -> str | None:
    """Give ``response`` to ``question``; the problem when its content breaks the schema (the
    question stays open), else ``None`` (a question withdrawn meanwhile is left alone)."""
    if not question.pending:
        return None
    try:
        if response["action"] == "accept":
            await question.accept(response.get("content") or {})
        elif response["action"] == "decline":
            await question.decline()
        else:
            await question.cancel()
    except ElicitationContentError as error:
        return f"the content does not match the requested schema: {error}"
    except ElicitationError:  # answered or withdrawn meanwhile (its call ended): nothing to answer
        return None
    return None
