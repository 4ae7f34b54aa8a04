"""ipybox as the client under test of the MCP conformance suite (``@modelcontextprotocol/conformance``).

The suite starts a test server for each scenario and runs ``python client.py <server url>`` with
the scenario's name in ``MCP_CONFORMANCE_SCENARIO`` (and credentials, where a scenario has them, in
``MCP_CONFORMANCE_CONTEXT``). The client uses ipybox's public API only (``McpRegistry`` with the
config a user would write) and does what an application would do: register the server (connect,
list its tools) and call a tool. For an ``auth/`` scenario the config says ``"auth"``, and the
application's authorization step is :func:`authorize`: the suite's authorization server redirects
at once, so following the authorization URL (as a browser would) yields the redirect to answer with.
An upstream question (elicitation) is answered by :func:`elicit` with the schema's defaults.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import httpx2

from ipybox_core.mcp import McpRegistry
from ipybox_core.mcp.elicitation import ElicitationAnswer, ElicitationRequest
from ipybox_core.mcp.oauth import AuthorizationRequest
from ipybox_core.mcp.oauth_store import MemoryTokenStore

CALLS = {"tools_call": ("add_numbers", {"a": 5, "b": 3})}
"""The tool call each scenario expects of its client (the others only connect and list tools)."""
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""The client ID metadata document the suite expects a client to offer (auth/basic-cimd)."""


def auth_config(scenario: str, context: dict[str, Any]) -> dict[str, Any] | None:
    """The ``"auth"`` entry a user would write for the scenario's server."""
    if not scenario.startswith("auth/"):
        return None
    if "private_key_pem" in context:
        return {
            "type": "oauth",
            "grant": "client_credentials",
            "client_id": context["client_id"],
            "private_key": context["private_key_pem"],
            "signing_algorithm": context.get("signing_algorithm", "RS256"),
        }
    if scenario.startswith("auth/client-credentials"):
        return {
            "type": "oauth",
            "grant": "client_credentials",
            "client_id": context["client_id"],
            "client_secret": context["client_secret"],
        }
    if "client_id" in context:  # a pre-registered client
        return {"type": "oauth", "client_id": context["client_id"], "client_secret": context["client_secret"]}
    return {"type": "oauth", "client_metadata_url": CLIENT_METADATA_URL}


async def authorize(request: AuthorizationRequest) -> str:
    """Open the authorization URL like a browser and answer with where it is sent back to."""
    async with httpx2.AsyncClient() as http:
        response = await http.get(request.url)
    location = response.headers.get("location")
    if not response.is_redirect or location is None:
        raise RuntimeError(f"the authorization server did not redirect (HTTP {response.status_code})")
    return str(response.url.join(location))


async def elicit(request: ElicitationRequest) -> ElicitationAnswer:
    """Accept every question with nothing filled in: ipybox completes the answer with the defaults."""
    return ElicitationAnswer.accept()


async def main(url: str, scenario: str, context: dict[str, Any]) -> None:
    config: dict[str, Any] = {"url": url}
    auth = auth_config(scenario, context)
    if auth is not None:
        config["auth"] = auth
    async with McpRegistry(
        connect_timeout=20,
        call_timeout=20,
        authorize=authorize,
        token_store=MemoryTokenStore(),
        elicit=elicit,
    ) as registry:
        tools = await registry.add("conformance", config)
        print(f"{scenario}: {len(tools)} tools: {', '.join(tool.name for tool in tools)}")
        call = CALLS.get(scenario)
        if call is None and tools and scenario not in ("initialize",):
            call = (tools[0].name, {})
        if call is not None:
            result = await registry.call("conformance", *call)
            print(f"{call[0]}: {result.text}")


if __name__ == "__main__":
    asyncio.run(
        main(
            sys.argv[-1],
            os.environ.get("MCP_CONFORMANCE_SCENARIO", ""),
            json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}"),
        )
    )
