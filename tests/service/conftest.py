"""One ``ipybox serve`` per test module, and a conversation of its own for each test.

The service's test MCP server is shared by the module's tests; each test's application processes
work in the test's own conversation (``$SERVICE_TEST_CONVERSATION``: its own kernel) and count with
``count(tag=<conversation>)`` (its own counter), so "count 1" still means "ran once". A test that
needs a fresh service (a restart) starts its own with :func:`service_kit.start_service`.
The application processes are forked from the session's fork server (:class:`service_kit.AppServer`),
ended at the session's end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from service_kit import APP_SERVER, CONVERSATION_ENV, Service, start_service


@pytest.fixture(scope="session", autouse=True)
def app_server() -> Iterator[None]:
    """The session's fork server of application processes; it must exit cleanly at the end."""
    yield
    assert APP_SERVER.close() == 0


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The module's ``ipybox serve``; it must exit cleanly at the end."""
    shared = start_service(tmp_path_factory.mktemp("service") / "ws")
    yield shared
    assert shared.stop() == 0


@pytest.fixture(autouse=True)
def conversation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """This test's conversation key, passed to the application processes it starts."""
    key = f"{request.node.originalname[:40]}-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(CONVERSATION_ENV, key)
    return key
