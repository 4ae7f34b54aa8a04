"""How an execution or a call failed, in words for the model (with ``describe_failure``)."""

from __future__ import annotations

from ipybox_core.errors import ExecutionCancelled, ExecutionTimeout, KernelDied

EXECUTION_FAILURES = (ExecutionTimeout, KernelDied, ExecutionCancelled)
"""What an execution raises when it ends without a result (the model is told ``describe_failure``)."""


def error_text(error: BaseException) -> str:
    """An error's message: its ``message`` (a handler's ``ModelRetry``), else its text, else its type."""
    return getattr(error, "message", None) or str(error) or type(error).__name__
