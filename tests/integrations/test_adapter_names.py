"""The three framework adapters name the same concept the same way."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import ipybox_core
from ipybox_core import CodeExecutor
from ipybox_core.executor.executor import DEFAULT_ABANDON_AFTER
from ipybox_integrations.langchain import CodeActionMiddleware
from ipybox_integrations.openai_agents import CodeActionTool
from ipybox_integrations.pydantic_ai import CodeAction

ADAPTERS = [CodeAction, CodeActionMiddleware, CodeActionTool]
SHARED_OPTIONS = {"timeout", "abandon_after", "reference_max_chars"}


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda adapter: adapter.__name__)
def test_every_adapter_takes_the_shared_options_by_the_same_names(adapter: type[Any]) -> None:
    parameters = inspect.signature(adapter.__init__).parameters
    assert set(parameters) >= SHARED_OPTIONS
    assert all(parameters[name].default is None for name in ("timeout", "reference_max_chars"))
    # The backstop belongs to where the execution lives (the executor's, or the service's
    # --approval-timeout); an adapter's own timer runs only when the application asks for one.
    assert parameters["abandon_after"].default is None
    assert CodeExecutor.abandon_after == DEFAULT_ABANDON_AFTER == 900.0


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda adapter: adapter.__name__)
def test_every_adapter_counts_and_cancels_suspended_executions_by_the_same_names(adapter: type[Any]) -> None:
    assert isinstance(inspect.getattr_static(adapter, "suspended"), property)
    assert inspect.iscoroutinefunction(adapter.cancel_suspended)
    assert "reason" in inspect.signature(adapter.cancel_suspended).parameters
    assert inspect.iscoroutinefunction(adapter.aclose)


def test_async_close_is_aclose_everywhere() -> None:
    """One name for async close across core and adapters (``close`` stays a plain, sync close)."""
    src = Path(ipybox_core.__file__).parent.parent
    found = [
        f"{path.relative_to(src)}:{number}"
        for path in sorted(src.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.match(r"\s*async def close\(", line)
    ]
    assert found == [], f"async close is called aclose(): rename {found}"
