"""What a process's first call to a tool builds, built when the call arrives instead of when it runs.

The MCP client compiles a tool's output-schema validator (``jsonschema``'s metaschema check, ~1 ms
per schema) on the tool's first structured result, and pydantic builds the protocol models of a
``tools/call`` (the request, the result's adapters for the negotiated version) on a process's first
call. A call held for approval would build them right after the human approved it, in a process that
just resumed the flow: the wait the human sees. The tool server looks a call's tool up before the
call is decided (:meth:`~ipybox_core.mcp.connection.McpConnection.tool`), and that lookup builds them
with the functions here, so the approval is followed by the call alone. A call that is not held pays
the same work a moment earlier.

Built once: the protocol models once per process and protocol version, a validator once per tool and
connection (kept by the client, as it keeps the validators of the tools it has called).

A call's lookup is still on the way to the next request a human sees: the call that comes after an
approved one is looked up after that approval. So a connection also compiles the validators of the
first :data:`BACKGROUND_VALIDATORS` tools it listed right after connecting, once the background
``import jsonschema`` that connecting starts is done, one tool per event-loop step.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from mcp.types import CallToolRequest, CallToolRequestParams
from mcp_types.methods import parse_server_result

from ipybox_core.mcp._schema_import import import_jsonschema, jsonschema_imported

_log = logging.getLogger(__name__)

_warmed_versions: set[str] = set()


def build_call_models(version: str | None) -> None:
    """Build the models of a ``tools/call`` request and result for ``version`` (once per process)."""
    if version is None or version in _warmed_versions:
        return
    _warmed_versions.add(version)
    try:
        CallToolRequest(params=CallToolRequestParams(name="ipybox-warm-up", arguments={}))
        parse_server_result("tools/call", version, {"content": []})  # what the lenient transport checks
    except Exception:  # the real call builds (or fails) as it always did
        _log.debug("building the tools/call models for %s failed", version, exc_info=True)


def has_output_validator(client_session: Any, tool: str) -> bool:
    """Whether the MCP client holds a compiled output-schema validator for ``tool``."""
    validators = getattr(client_session, "_tool_output_validators", None)
    return isinstance(validators, dict) and tool in validators


def needs_output_validator(client_session: Any, tool: str) -> bool:
    """Whether ``tool`` has an output schema the MCP client has not compiled a validator for yet."""
    schemas = getattr(client_session, "_tool_output_schemas", None)
    return (
        isinstance(schemas, dict)
        and schemas.get(tool) is not None
        and not has_output_validator(client_session, tool)
    )


def build_output_validator(client_session: Any, tool: str) -> None:
    """Compile the MCP client's validator for ``tool``'s output schema (the one its first structured
    result would compile; the client keeps it for the connection). Needs ``jsonschema`` imported."""
    if not needs_output_validator(client_session, tool):
        return
    compile_validator = getattr(client_session, "_output_schema_validator", None)
    if compile_validator is None:  # another SDK version: its first result compiles it
        return
    try:
        compile_validator(tool, client_session._tool_output_schemas[tool])
    except Exception:  # an invalid schema: the call reports it (the client never caches a failure)
        _log.debug("compiling the output-schema validator of %r failed", tool, exc_info=True)


BACKGROUND_VALIDATORS = 64
"""At most this many tools' validators are compiled per connection before any call (~1 ms each)."""


def compile_output_validators_soon(
    client_session: Any, *, alive: Callable[[], bool]
) -> asyncio.Future[None] | None:
    """Compile the validators of the listed tools that have output schemas (at most
    :data:`BACKGROUND_VALIDATORS`), once ``jsonschema`` is imported: one tool per step of the event
    loop (the client's caches belong to its thread), stopping once ``alive()`` is false. Returns a
    future done when they are compiled (``None`` when there is nothing to compile)."""
    schemas = getattr(client_session, "_tool_output_schemas", None)
    if not isinstance(schemas, dict):
        return None
    names = [name for name, schema in schemas.items() if schema is not None][:BACKGROUND_VALIDATORS]
    if not names:
        return None
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def step(index: int) -> None:
        if index == len(names) or not alive() or not jsonschema_imported():
            if not done.done():
                done.set_result(None)
            return
        build_output_validator(client_session, names[index])
        loop.call_soon(step, index + 1)

    def start(imported: asyncio.Future[None]) -> None:
        if not imported.cancelled() and imported.exception() is not None:
            _log.debug("import jsonschema failed", exc_info=imported.exception())
        step(0)

    loop.run_in_executor(None, import_jsonschema).add_done_callback(start)  # waits off the loop
    return done
