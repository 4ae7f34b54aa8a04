"""An OAuth-protected MCP server: the user authorizes once in a browser, kernel code calls its tools.

    python examples/oauth.py https://mcp.example.com/mcp

Registers the server with ``"auth": "oauth"``: ipybox discovers its authorization server, registers
itself as a client, and hands this script the authorization URL; the script prints it (and opens a
browser where there is one) and receives the redirect on a loopback port. Tokens are kept in a
``0600`` file on the host (``--state DIR``, default: the user's ipybox state directory), so the next
run asks nobody. Kernel code then lists the server's functions; the kernel never sees a token. Last,
the same server registered without ``"auth"`` shows the one-line error of a 401.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import webbrowser
from pathlib import Path

from ipybox_core.errors import McpAuthorizationError
from ipybox_core.executor import CodeExecutor
from ipybox_core.mcp.oauth import AuthorizationRequest
from ipybox_core.mcp.oauth_loopback import LoopbackRedirect
from ipybox_core.mcp.oauth_store import FileTokenStore


# --8<-- [start:authorize]
async def authorize(request: AuthorizationRequest) -> str:
    """The authorization step, answered by this application: show the URL, return the redirect."""
    async with LoopbackRedirect(request.redirect_uri) as redirect:  # listening before the user can click
        print(f"MCP server {request.server!r} needs your authorization: open {request.url}", flush=True)
        with contextlib.suppress(Exception):
            webbrowser.open(request.url)
        return await redirect.wait()  # http://127.0.0.1:33418/callback?code=...&state=...


# --8<-- [end:authorize]


async def main(url: str, state: Path | None) -> None:
    # --8<-- [start:register]
    config = {"url": url, "auth": {"type": "oauth"}}  # no client_id: dynamic client registration
    store = FileTokenStore(state) if state is not None else None  # None: <state dir>/oauth
    async with CodeExecutor(mcp_authorize=authorize, mcp_token_store=store) as executor:
        await executor.register_mcp_server("remote", config)
        result = await executor.execute("import mcptools.remote as remote\nprint(sorted(remote.TOOLS))")
        print("functions:", result.text.strip())
        # --8<-- [end:register]
        # --8<-- [start:error]
        try:
            await executor.register_mcp_server("unauthorized", {"url": url})
        except McpAuthorizationError as error:  # one line: the server, the HTTP status, the fix
            print(error)
        # --8<-- [end:error]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the MCP server's Streamable HTTP URL")
    parser.add_argument("--state", type=Path, help="keep the tokens in this directory")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.url, arguments.state))
