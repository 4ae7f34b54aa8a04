"""A Starlette app served by two uvicorn worker processes, each with one ``RemoteSessions`` entered
in its lifespan (``OUTAGE_SERVICE_URL``): ``GET /run?conversation=KEY`` runs code in that
conversation's kernel; an outage of the service answers ``503`` with the ``ServiceError``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ipybox_core.errors import ServiceError
from ipybox_core.remote import RemoteSessions


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    url = os.environ["OUTAGE_SERVICE_URL"]
    async with RemoteSessions(url, client_name=f"worker-{os.getpid()}", wait_for_service=120) as sessions:
        app.state.sessions = sessions
        yield


async def run(request: Request) -> JSONResponse:
    conversation = request.query_params["conversation"]
    try:
        executor = (await request.app.state.sessions.session(conversation)).executor
        result = await executor.stream("print(6 * 7)").wait()
    except ServiceError as error:
        return JSONResponse({"error": "ServiceError", "message": str(error)}, status_code=503)
    return JSONResponse({"text": result.text.strip().splitlines()[-1], "worker": os.getpid()})


app = Starlette(routes=[Route("/run", run)], lifespan=lifespan)
