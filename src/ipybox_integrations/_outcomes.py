"""A decided call's outcome where a native tool's result would show: its span, its tool run."""

from __future__ import annotations

from typing import Any

from ipybox_core.approval import CallOutcome

UNREPORTED = "approved: the call was sent to the MCP server"
"""Shown where the outcome is not reported (over ipybox serve: the service does not relay results)."""


def outcome_value(outcome: CallOutcome) -> Any:
    """What a call that returned came to: its structured content, else its text."""
    return outcome.structured if outcome.structured is not None else outcome.text


def outcome_error(outcome: CallOutcome) -> str:
    """What a call that gave no result came to: what the code saw (``rejected``, ``tool_error``,
    ...) and the message."""
    return f"{outcome.error}: {outcome.text}"
