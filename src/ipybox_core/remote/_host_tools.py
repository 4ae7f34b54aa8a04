"""The agent tools of an application whose kernels live in an ipybox service.

Their code stays in the application: the service gets their definitions with each ``execute_code``
call (and generates the kernel's ``agent_tools`` package from them), and a call of the code comes
back as a round that this process runs and answers (:meth:`RemoteHostTools.run`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from ipybox_core.codegen.reference import INTRO
from ipybox_core.hosttools import HostTool, HostTools
from ipybox_core.hosttools._package import host_reference
from ipybox_core.hosttools._wire import CallQuestion, run_call, tool_data

SHORTENED = "# (reference shortened: use help(function) in the code for the rest)\n"


class RemoteHostTools:
    """Host tools for kernels in an ipybox service: what the service gets, what the prompt shows."""

    def __init__(self) -> None:
        self.tools = HostTools()
        self.data: list[dict[str, Any]] | None = None
        """Their definitions, as sent with ``execute_code`` (``None``: none registered yet)."""
        self.reference = ""
        """Their API reference (``from agent_tools import ...``)."""

    async def replace(self, tools: Iterable[HostTool]) -> None:
        """Use ``tools`` from the next execution on."""
        given = HostTools(tools)
        reference = await asyncio.to_thread(host_reference, given, package="mcptools")
        self.tools, self.data, self.reference = given, [tool_data(tool) for tool in given], reference

    async def run(self, question: CallQuestion, context: Any) -> str:
        """Run the code's call ``question`` here, with ``context`` bound; the outcome's text."""
        return await run_call(self.tools, question, context)


def joined_reference(service: str, host: str, max_chars: int | None) -> str:
    """The service's reference and the agent tools' after it (one introduction), shortened to
    ``max_chars``."""
    text = f"{service.rstrip()}\n\n{host.removeprefix(INTRO)}" if service and host else service or host
    if max_chars is None or len(text) <= max_chars:
        return text
    head = text[: max(max_chars - len(SHORTENED), 0)]
    return head[: head.rfind("\n") + 1] + SHORTENED
