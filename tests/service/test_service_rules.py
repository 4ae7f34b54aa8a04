"""``ipybox serve --approval-rules``: the service decides by the rules, and the audit log says who
decided every call (``policy:...``, ``client:<name>``, ``moved-on``, ``shutdown``), never a made-up
``user``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from service_kit import TOKEN, serve_command, start_service

from ipybox_core.approval import ApprovalRequest
from ipybox_core.executor import ExecutionResult
from ipybox_core.remote import RemoteSessions

RULES = """\
allow_read_only = true      # add() is annotated readOnlyHint
deny = ["test.die"]
default = "ask"
"""
CALLS = """\
from mcptools.test import add, die
print("sum", add(a=1, b=2))
try:
    die()
except PermissionError as error:
    print("refused:", error)
"""


def _decisions(audit: Path) -> list[tuple[str, bool, str]]:
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    return [(r["tool"], r["approved"], r["decided_by"]) for r in records if "decided_by" in r]


async def test_rules_decide_in_the_service_and_the_audit_log_names_every_decider(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    audit = tmp_path / "audit.jsonl"
    service = start_service(tmp_path / "ws", "--approval-rules", str(rules), "--audit-log", str(audit))
    try:
        async with RemoteSessions(service.url, token=service.token, client_name="rules-app") as sessions:
            executor = (await sessions.session("rules")).executor
            ran = await executor.stream(CALLS).next_stop()
            assert isinstance(ran, ExecutionResult), "a read-only call and a denied one ask nobody"
            assert "sum 3" in ran.text and "refused: " in ran.text and "policy:deny test.die" in ran.text
            counting = executor.stream("from mcptools.test import count\nprint(count())")
            asked = await counting.next_stop()
            assert isinstance(asked, ApprovalRequest) and asked.name == "test.count"
            await asked.accept()
            assert (await counting.wait()).text.strip() == "1"
            moved_on = await executor.stream(
                "from mcptools.test import count\ncount()", call_id="left"
            ).next_stop()
            assert isinstance(moved_on, ApprovalRequest)
            assert await executor.cancel_waiting() == 1
            waiting = await executor.stream(
                "from mcptools.test import count\ncount()", call_id="w"
            ).next_stop()
            assert isinstance(waiting, ApprovalRequest)
    finally:
        assert service.stop() == 0  # the call "w" still waits: the shutdown rejects it
    assert _decisions(audit) == [
        ("add", True, "policy:read-only"),
        ("die", False, "policy:deny test.die"),
        ("count", True, "client:rules-app"),
        ("count", False, "moved-on"),
        ("count", False, "shutdown"),
    ]


def test_a_bad_rules_file_stops_the_start_with_one_line_per_problem(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"allow": "test.*", "deny": ["test.die", 3], "defualt": "allow"}))
    started = subprocess.run(
        serve_command(tmp_path / "ws", "--approval-rules", str(rules)),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "IPYBOX_MCP_TOKEN": TOKEN},
        check=False,
    )
    assert started.returncode == 2
    assert started.stderr.splitlines() == [
        f"ipybox: error: invalid approval rules {rules} (3 problems):",
        "  unknown key 'defualt' (known: allow, deny, allow_read_only, default)",
        "  allow must be a list of patterns such as ['shop.list_*'], not 'test.*'",
        "  deny[1] must be a non-empty pattern string, not 3",
    ]
