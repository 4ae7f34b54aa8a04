"""Every script in examples/ runs offline, without a key, and does what the docs say it does.

The framework agents (``*_agent.py``) are run by their own tests under ``tests/integrations/``. Where
a docs page shows an example's output, the lines checked here must also appear on that page.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from example_runner import EXAMPLES, documented, run_example, run_in_terminal
from prerequisites import require

pytestmark = pytest.mark.slow


def test_quickstart_approves_both_calls_without_a_terminal() -> None:
    out = run_example("quickstart.py").stdout
    assert "(approving every MCP call automatically)" in out
    assert "def place_order(*, product_id: str, quantity: int = 1) -> Order:" in out  # the API reference
    lines = [
        "approve shop.list_products(category='books', in_stock_only=True) [read-only]? [y/N] y (auto)",
        "approve shop.place_order(product_id='b-101', quantity=1) [destructive]? [y/N] y (auto)",
        "ordered 'Structure and Interpretation of Computer Programs' for 48.0 USD: ord-1001",
    ]
    for line in lines:
        assert line in out
    documented("quickstart.md", lines[0].removesuffix(" (auto)"), lines[1].removesuffix(" (auto)"), lines[2])


def test_quickstart_in_a_terminal_asks_and_a_rejection_reaches_the_code() -> None:
    out = run_in_terminal("quickstart.py", ["y", "n"])
    assert "approving" not in out
    assert "approve shop.list_products(category='books', in_stock_only=True) [read-only]? [y/N] y" in out
    assert "approve shop.place_order(product_id='b-101', quantity=1) [destructive]? [y/N] n" in out
    # the rejection is a PermissionError in the agent's code, printed as its traceback
    assert "PermissionError: shop.place_order was rejected: the user said no" in out
    assert "ordered 'Structure" not in out


def test_multi_server_moves_the_data_between_servers_inside_the_kernel() -> None:
    out = run_example("multi_server.py", "--yes").stdout
    assert (
        "approve ledger.file_report(title='Revenue by category, days 1-30, EUR', lines=[{'label': 'books'"
        in out
    )
    assert "? [y/N] y (auto)" in out
    moved = re.search(r"(\d+) sales and 6 products \(([\d,]+) bytes of JSON\) stayed in the kernel", out)
    seen = re.search(r"the model would see ([\d,]+) characters", out)
    assert moved and seen, out
    assert int(moved[1]) == 2400
    kernel_bytes, model_chars = int(moved[2].replace(",", "")), int(seen[1].replace(",", ""))
    assert kernel_bytes > 100_000 and model_chars < 300, (kernel_bytes, model_chars)
    report = re.search(r"filed rep-0001: books ([\d,.]+) EUR, games ([\d,.]+) EUR, tools ([\d,.]+) EUR", out)
    assert report, out
    documented("examples.md", moved[0], seen[0], report[0])
    documented("index.md", f"the model sees {model_chars} characters")


def test_multi_server_rejection_reaches_the_code() -> None:
    out = run_in_terminal("multi_server.py", ["n"], returncode=1)  # the code action failed
    assert "PermissionError: ledger.file_report was rejected: the user said no" in out
    assert "filed rep-" not in out


def test_data_analysis_builds_on_state_and_saves_a_png(tmp_path: Path) -> None:
    plot = tmp_path / "weekly.png"
    out = run_example("data_analysis.py", "--out", str(plot)).stdout
    lines = [
        "[1] 7280 sales records, 11666 units",
        "[2] 13 weeks, web share 67%, busiest: week 7",
        "[3] (1 image(s))",
    ]
    for line in lines:
        assert line in out
    data = plot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000
    assert f"saved the plot ({len(data):,} bytes) to {plot}" in out
    documented("examples.md", *lines)


def test_code_execution_sections() -> None:
    out = run_example("code_execution.py").stdout
    assert out.startswith("area: 12.57\n12.566370614359172\n")
    streamed = re.findall(r"stdout: '((?:\d\\n)+)'", out)
    assert "".join(streamed) == r"0\n1\n2\n"
    for line in [
        "ZeroDivisionError - division by zero",
        "----> 1 1 / 0",
        "hello from the shell\nTrue",
        "1 image(s), ",
        "starts with b'\\x89PNG'",
        "timed out: the code ran longer than its 1 s timeout and was interrupted; the kernel's state is kept",
        "state kept: True",
        "after reset: False",
    ]:
        assert line in out, line
    documented("code_execution.md", "area: 12.57", "state kept: True")


def test_approvals_policies_edits_shell_timeout_and_audit_log() -> None:
    out = run_example("approvals.py").stdout
    audit = [
        "shop.list_products {} approved by policy:allow shop.list_*",
        "shop.place_order {'product_id': 't-302'} rejected by policy:deny shop.place_order",
        "shop.place_order {'product_id': 't-302', 'quantity': 5} approved as "
        "{'product_id': 't-302', 'quantity': 1} by user",
        "shell {'command': 'echo the shell ran'} approved by user",
        "shell {'command': 'rm -rf build'} rejected by policy:callable",
        "shop.place_order {'product_id': 't-301'} rejected by timeout",
    ]
    code_side = [
        "  refused: shop.place_order was rejected: denied by policy:deny shop.place_order",
        "  ordered 1",
        "  the shell ran",
        "  shell command rejected: denied by the approval policy",
        "  shop.place_order was rejected: approval timed out after 2 s without a decision",
    ]
    for line in audit + code_side:
        assert line in out, line
    assert out.rstrip().splitlines()[-len(audit) :] == audit  # the audit log, in order
    documented("approvals.md", *audit, *code_side)


def test_codegen_config_api_and_secrets() -> None:
    out = run_example("codegen.py").stdout
    lines = [
        "MCP server 'ledger': environment variable LEDGER_TOKEN not set (${LEDGER_TOKEN} in "
        "env.LEDGER_TOKEN); set it or write ${VAR:-default}",
        "shop: from mcptools.shop import exchange_rate, list_products, place_order",
        "ledger: from mcptools.ledger import file_report, sales",
        "['__init__.py', '_base.py', '_tools']",
        "def sales(*, first_day: int = 1, last_day: int = 30) -> SalesList:",
        "exchange_rate(*, currency: str) -> float",
        "Product Go board (19x19) 35.0",
        "ToolError: Error executing tool exchange_rate: unknown currency 'XYZ'; known: CHF, EUR, GBP, JPY, USD",
        "invalid argument: 1 validation error for list_products",
        "LEDGER_TOKEN in the kernel: None",
        "report signed by the server: True",
    ]
    for line in lines:
        assert line in out, line
    assert "archived" not in out  # disabled in the config file
    assert "s3cr3t" not in out
    documented("api_generation.md", *lines)


def test_sandbox_example_blocks_what_it_should() -> None:
    require(shutil.which("bwrap") is not None, "bubblewrap (bwrap) is not installed")
    out = run_example("sandbox.py").stdout
    results = dict(line.split(" -> ", 1) for line in out.splitlines() if " -> " in line)
    results = {label.strip(): outcome for label, outcome in results.items()}
    assert results["write and read in the workspace"] == "'hello'"
    assert results["read a file outside the workspace"].startswith("FileNotFoundError")
    assert results["read the workspace's .env file"].startswith("PermissionError")
    assert results["list your ~/.ssh"].startswith("FileNotFoundError")
    assert results["write to /etc"].startswith("OSError: [Errno 30] Read-only file system")
    assert results["connect to the internet"].startswith(("gaierror", "OSError"))
    assert results["call an MCP tool (through the tool server)"] == "6"
    assert "do-not-leak" not in out and "must not read this" not in out


def test_sandbox_example_explains_a_missing_sandbox(tmp_path: Path) -> None:
    out = run_example("sandbox.py", env={"PATH": str(tmp_path)}).stdout  # no bwrap on this PATH
    assert "the sandbox cannot run on this machine:" in out
    assert "bubblewrap (bwrap) is not installed on PATH" in out
    assert " -> " not in out  # nothing ran


def test_sandbox_policy_file_starts_a_sandboxed_kernel(tmp_path: Path) -> None:
    from ipybox_core import SandboxPolicy

    policy = SandboxPolicy.from_file(EXAMPLES / "sandbox_policy.toml")
    assert policy.allow_hosts == ("pypi.org", "files.pythonhosted.org")
    assert policy.limits.memory_mb == 2048 and policy.limits.cpu_seconds == 600
    require(shutil.which("bwrap") is not None, "bubblewrap (bwrap) is not installed")
    script = tmp_path / "check.py"
    script.write_text(
        "import asyncio, sys\n"
        "from ipybox_core import CodeExecutor\n"
        "async def main():\n"
        f"    async with CodeExecutor(workspace={str(tmp_path)!r}, sandbox=sys.argv[1]) as ex:\n"
        "        print((await ex.execute('import os; os.environ[\"HTTPS_PROXY\"]')).text)\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, str(script), str(EXAMPLES / "sandbox_policy.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "'http://127.0.0.1:" in done.stdout  # allow_hosts: the kernel talks to the filtering proxy


def test_langchain_callback_decides_outside_a_graph() -> None:
    out = run_example("langchain_callback.py").stdout
    assert "approval needed: shop.list_products {'category': 'tools'}" in out
    assert "approval needed: shop.place_order {'product_id': 't-302', 'quantity': 1}" in out
    assert "not ordered: shop.place_order was rejected: orders need a manager" in out


def test_every_example_script_is_run_by_a_test() -> None:
    tests = Path(__file__).parents[1]
    sources = "\n".join(path.read_text(encoding="utf-8") for path in tests.rglob("test_*.py"))
    scripts = list(EXAMPLES.glob("*.py"))
    assert scripts
    for script in scripts:
        ast.parse(script.read_text(encoding="utf-8"))  # at least valid Python
        assert f'"{script.name}"' in sources, f"no test runs examples/{script.name}"


def test_mcp_client_against_ipybox_served_in_process_over_http() -> None:
    """The stdio mode is run by tests/core/mcp_server/test_mcp_server_docs.py against its docs page."""
    out = run_example("mcp_client.py", "--http").stdout
    assert out.splitlines() == [
        'ipybox: approve this MCP tool call (read-only)?  server: shop tool: list_products arguments: {   "category": "books" }',
        "ipybox: approve this MCP tool call (destructive)?  server: shop tool: place_order arguments: "
        '{   "product_id": "b-101",   "quantity": 1 }',
        "cheapest: Structure and Interpretation of Computer Programs for 48.0 USD",
        "not ordered: shop.place_order was rejected: the user declined the MCP call",
    ]


def test_gateway_example_runs_code_on_a_kernel_gateway() -> None:
    out = run_example("gateway.py").stdout
    assert "a remote deployment would use: https://gateway.example.internal:8888" in out  # config validated
    if importlib.util.find_spec("kernel_gateway") is None or importlib.util.find_spec("websockets") is None:
        assert "the gateway extra is not installed: pip install -e '.[gateway]'" in out
        return
    assert "approve shop.list_products(category='games') [read-only]? [y/N] y (auto)" in out
    assert "2 games" in out  # the demo shop has two games: the MCP call went through the tool server


@pytest.mark.parametrize(
    ("example", "page"),
    [
        ("pydantic_ai_sessions.py", "frameworks/pydantic_ai.md"),
        ("openai_agents_sessions.py", "frameworks/openai_agents.md"),
    ],
)
def test_sessions_examples_keep_conversations_and_their_approvals_apart(example: str, page: str) -> None:
    lines = [
        "alice: ['Structure and Interpretation of Computer Programs']",
        "bob: []",
        "alice: ['shop.place_order'] waits",
        "bob: 20",  # while alice's call waits
        "alice: ordered for 48.0 USD (budget 50 USD): ord-1001",
        "bob: the Python kernel of this conversation was restarted (it was closed by the application): "
        "variables and imports from earlier code are gone (files in the workspace remain)",
        "",
        "False",
    ]
    assert run_example(example).stdout.splitlines() == lines
    documented(page, *(line for line in lines if line))
