"""The service wire format: every error kind decodes to the exception it encoded, with its fields."""

from __future__ import annotations

import pytest

from ipybox_core import protocol
from ipybox_core.approval import ApprovalRequest
from ipybox_core.errors import (
    ApprovalError,
    ExecutionCancelled,
    ExecutionGone,
    ExecutionTimeout,
    ExecutorBusy,
    IpyboxError,
    KernelDied,
    ServiceError,
)

EXAMPLES: list[IpyboxError] = [
    ExecutorBusy("another execution runs"),
    ExecutionGone("gone", cause="restarted"),
    ExecutionGone("gone"),
    ApprovalError("already answered by client:b", decided_by="client:b"),
    ExecutionTimeout("the code ran longer than its 1 s timeout", timeout=1.0),
    KernelDied("the kernel died (exit code 3)", exit_code=3),
    ExecutionCancelled("the conversation moved on"),
    ServiceError("the kernel could not start"),
]


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda error: type(error).__name__)
def test_every_error_comes_back_as_its_class_with_its_fields(error: IpyboxError) -> None:
    decoded = protocol.decode_error(protocol.encode_error(error), "the result's text")
    assert type(decoded) is type(error)
    assert str(decoded) == str(error)
    assert vars(decoded) == vars(error)  # timeout, exit_code, cause, decided_by
    assert protocol.failure_text(decoded) == protocol.failure_text(error)


def test_every_kind_has_one_class_and_decodes_from_bare_data() -> None:
    for kind in protocol.ERROR_KINDS:
        decoded = protocol.decode_error(protocol.error_data(kind, "text"))  # no fields: still constructible
        assert protocol.error_kind(decoded) == kind
        assert str(decoded) == "text"
    assert isinstance(protocol.decode_error({"kind": "no-such-kind"}, "why"), ServiceError)
    assert isinstance(protocol.decode_error("not data", "why"), ServiceError)


def test_the_model_is_told_the_true_cause() -> None:
    assert protocol.failure_text(EXAMPLES[4]) == "Error: timed out: the code ran longer than its 1 s timeout."
    assert protocol.failure_text(EXAMPLES[5]).startswith("Error: the kernel died")
    assert protocol.failure_text(EXAMPLES[1]) == protocol.SERVICE_RESTARTED_MESSAGE
    assert protocol.failure_text(EXAMPLES[2]) == protocol.GONE_MESSAGE
    assert "client:b" in protocol.failure_text(EXAMPLES[3])
    assert "the conversation moved on" in protocol.failure_text(EXAMPLES[6])
    assert protocol.failure_text(EXAMPLES[0]) == protocol.BUSY_MESSAGE
    assert "Kernel state is kept" not in protocol.NOT_WAITING_MESSAGE  # the kernel may be new


def test_session_names_follow_one_rule() -> None:
    assert protocol.service_key("conv-1.a_b~") == "conv-1.a_b~"
    digest = protocol.service_key("user/42 chat")
    assert protocol.is_name(digest) and digest.startswith("k-")
    assert protocol.plain_name("host name/7") == "host-name-7"
    assert not protocol.is_name("x" * 129)


async def test_an_approval_travels_with_its_id() -> None:
    request = ApprovalRequest(kind="mcp", server="test", tool="add", args={"a": 1})
    again = protocol.approval_from_data(protocol.approval_data(request))
    assert (again.id, again.name, again.args) == (request.id, "test.add", {"a": 1})
    with pytest.raises(ServiceError):
        protocol.approval_from_data({"kind": "mcp"})
