"""Sessions on an ipybox service: the adapters' session source when kernels live in ``ipybox serve``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from ipybox_core.approval import ApprovalRules
from ipybox_core.hosttools import HostTool
from ipybox_core.protocol import WaitingApproval, service_key
from ipybox_core.remote._connection import TOKEN_ENV, ServiceConnection, default_client_name
from ipybox_core.remote._executor import RemoteExecutor
from ipybox_core.remote._host_tools import RemoteHostTools, joined_reference

_REFERENCE_SESSION = "ipybox-api-reference"


class RemoteSession:
    """One conversation's kernel on the service (``key``), with its :class:`RemoteExecutor`."""

    def __init__(self, key: str, executor: RemoteExecutor) -> None:
        self.key = key
        self.executor = executor

    def take_restart_notice(self) -> str | None:
        """Always ``None``: the service puts its restart notice in the next result itself."""
        return None


class RemoteSessions:
    """One kernel per conversation key, on an ipybox service (``ipybox serve``).

    Give it to an adapter where you would give ``Sessions``: ``CodeAction(RemoteSessions(url))``.
    Kernels, MCP connections, credentials and parked approvals live in the service, so any process
    that knows a conversation's key can answer its pending approval, and the code continues in the
    same kernel. ``token`` defaults to ``$IPYBOX_MCP_TOKEN``; ``client_name`` (default
    ``<host>-<pid>``) is what the service's audit log records for this process's decisions.

    An outage never reaches further than the call it hits: while the service is unreachable each
    call raises :class:`~ipybox_core.errors.ServiceError` in the task that made it (the task that
    entered ``RemoteSessions``, e.g. a FastAPI lifespan, is never cancelled), and the next call
    connects again by itself. ``wait_for_service`` (seconds, default 0) lets :meth:`start` wait for
    a service that is not up yet, e.g. a worker started before it.

    ``approval_rules`` narrow the service's own rules (``--approval-rules``) for every session of
    this client, never widen them: the service's rules decide first, and a call they allow is asked
    or denied when these say so (a session's ``executor.approval_rules`` narrows that session).

    The approvals inbox: :meth:`waiting_approvals` lists what waits across every conversation of
    the service, :meth:`answer_approval` answers one (audited as ``client:<client_name>``).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        client_name: str | None = None,
        connect_timeout: float = 30.0,
        wait_for_service: float = 0.0,
        approval_rules: ApprovalRules | None = None,
    ) -> None:
        self.url = url
        self.wait_for_service = wait_for_service
        self.approval_rules = approval_rules
        self._connection = ServiceConnection(
            url,
            token=token if token is not None else os.environ.get(TOKEN_ENV),
            client_name=client_name or default_client_name(),
            connect_timeout=connect_timeout,
        )
        self._reference = ""
        self._host = RemoteHostTools()
        self._sessions: dict[str, RemoteSession] = {}
        self._open = False

    async def __aenter__(self) -> RemoteSessions:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Connect (checking the token) and fetch the API reference of the service's MCP servers."""
        if self._open:
            return
        await self._connection.open(wait=self.wait_for_service)
        self._open = True
        reference = await self._connection.call_tool(_REFERENCE_SESSION, "api_reference", {})
        self._reference = "" if reference.startswith("No MCP servers") else reference

    async def aclose(self) -> None:
        """Close the connection (the sessions and their kernels stay in the service)."""
        self._open = False
        await self._connection.aclose()

    @property
    def shares_kernel(self) -> bool:
        """False: each conversation key has its own kernel in the service."""
        return False

    async def session(self, key: str) -> RemoteSession:
        """The session of conversation ``key`` (its kernel starts in the service on first use)."""
        if not self._open:
            await self.start()
        session = self._sessions.get(key)
        if session is None:
            executor = RemoteExecutor(
                self._connection,
                service_key(key),
                self._service_reference,
                approval_rules=self.approval_rules,
                host_tools=self._host,
            )
            session = self._sessions[key] = RemoteSession(key, executor)
        return session

    def api_reference(self, servers: list[str] | None = None, *, max_chars: int | None = None) -> str:
        """The Python API of the service's MCP servers (as fetched by :meth:`start`) and of the
        host tools (:meth:`register_host_tools`)."""
        del servers  # the service's reference covers all of its servers
        return joined_reference(self._reference, self._host.reference, max_chars)

    async def register_host_tools(self, tools: Iterable[HostTool]) -> None:
        """Let every session's code call ``tools`` (``from agent_tools import ...``), as
        :meth:`Sessions.register_host_tools <ipybox_core.sessions.Sessions.register_host_tools>`
        does; their code runs in this process. The service generates their API from the
        definitions sent with the next ``execute_code`` call of each session, and hands each call
        of the code back to the process whose round the execution is in at that moment (see
        ``docs/service.md``)."""
        await self._host.replace(tools)

    def _service_reference(self) -> str:
        return self._reference

    # --- the approvals inbox ------------------------------------------------------------------

    async def waiting_approvals(self, conversation: str | None = None) -> list[WaitingApproval]:
        """Every approval that waits in the service, across conversations (only ``conversation``'s
        when given), oldest first: who asked, since when, for which call.

        Raises:
            ServiceError: the service could not be reached.
        """
        if not self._open:
            await self.start()
        key = None if conversation is None else service_key(conversation)
        return await self._connection.waiting_approvals(key)

    async def answer_approval(
        self,
        approval_id: str,
        *,
        approve: bool,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> WaitingApproval:
        """Answer the waiting approval ``approval_id`` (a :class:`WaitingApproval`'s ``id``, or its
        first 8 or more characters): run the call (``approve``, optionally with edited
        ``arguments``) or reject it with ``reason``. Returns the approval as it was listed.

        The service audits it as ``client:<client_name>`` and continues the execution at once; the
        conversation gets the outcome when it next resumes the call (``reattach``), or as the answer
        to its own decision if it was still asked.

        Raises:
            ApprovalError: it was answered already (``decided_by`` names who answered first), or
                it waits in the inbox's own session.
            ExecutionGone: nothing waits under that id (answered, expired, cancelled, or the
                service restarted).
            ServiceError: the service could not be reached.
        """
        if not self._open:
            await self.start()
        return await self._connection.answer_approval(
            approval_id, approve=approve, reason=reason, arguments=arguments
        )
