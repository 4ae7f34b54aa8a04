"""A small stdio MCP server whose tools ask their user questions (elicitation) during a call, and
remember every answer they got, so a test can check what reached the server.

    python elicit_server.py
"""

from __future__ import annotations

import asyncio

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field


class Booking(BaseModel):
    """The form ``book`` asks the user to fill in."""

    seats: int = Field(default=1, ge=1, le=9)
    window: bool = False


def build_server() -> MCPServer:
    mcp = MCPServer("ipybox-test-elicit")
    answers: list[str] = []
    arrived = asyncio.Condition()

    async def record(line: str) -> None:
        async with arrived:
            answers.append(line)
            arrived.notify_all()

    @mcp.tool()
    async def book(flight: str, ctx: Context) -> str:
        """Ask the user how many seats to book on ``flight``; say what the answer was."""
        answer = await ctx.elicit(f"How many seats on {flight}?", Booking)
        if answer.action != "accept":
            line = f"{flight}: {answer.action}"
        else:
            line = f"{flight}: {answer.data.seats} seat(s), {'window' if answer.data.window else 'aisle'}"
        await record(line)
        return line

    @mcp.tool()
    async def answers_seen(count: int) -> list[str]:
        """The answers ``book`` got, once there are at least ``count`` of them (at most 30 s)."""
        async with arrived:
            await asyncio.wait_for(arrived.wait_for(lambda: len(answers) >= count), 30)
        return list(answers)

    @mcp.tool()
    async def nap(seconds: float) -> str:
        """Sleep ``seconds``, then answer (a call that outlives a short call timeout)."""
        await asyncio.sleep(seconds)
        return "rested"

    return mcp


if __name__ == "__main__":
    build_server().run()
