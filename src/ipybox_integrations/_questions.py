"""What an MCP server asks during a call of the code, as the adapters show it to the application
(LangChain's ``elicitation`` interrupt, PydanticAI's deferred question): one shape for both."""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict

from ipybox_core.mcp.elicitation import ElicitationRequest


class ElicitationQuestion(TypedDict):
    """What an MCP server asks during a call of the code (the value of an ``elicitation`` interrupt)."""

    tool_call_id: str
    """The ``execute_code`` call whose code made the MCP call."""
    server: str
    """The MCP server's name (its key in ``mcpServers``)."""
    tool: str | None
    """The tool whose call asked (``None`` when several calls of the server were running)."""
    message: str
    """What the server says to the user."""
    schema: NotRequired[dict[str, Any]]
    """A form: the JSON schema the content must match (an object of primitive properties)."""
    url: NotRequired[str]
    """URL mode: the page the user is asked to open (accepting says only that they agreed)."""
    error: NotRequired[str]
    """Why the last answer's content was refused (the question is asked again)."""


def asked_question(
    question: ElicitationRequest, call_id: str, error: str | None = None
) -> ElicitationQuestion:
    """``question`` as the application is shown it: the form's ``schema`` or, in URL mode, the
    ``url``; ``error`` when the last answer's content broke the schema."""
    asked = ElicitationQuestion(
        tool_call_id=call_id, server=question.server, tool=question.tool, message=question.message
    )
    if question.url is not None:
        asked["url"] = question.url
    else:
        asked["schema"] = dict(question.schema)
    if error is not None:
        asked["error"] = error
    return asked
