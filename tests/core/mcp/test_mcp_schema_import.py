"""A structured MCP result is validated without building jsonschema's IRI grammar (seconds per process).

The calls run in a fresh interpreter: what ``sys.modules`` holds after the first structured call is
the point. The same process then checks an IRI format, which must build the grammar (so the probe
sees it) and answer as before. (Without ipybox's deferral the MCP client's own ``import jsonschema``
builds it at the first call: ``connection.import_jsonschema = lambda: None`` makes this test fail.)
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from typing import Any

from prerequisites import require
from servers import PYTHON, RAW_SERVER_SCRIPT

GRAMMAR = "rfc3987_syntax.syntax_helpers"
"""The module whose import builds the Earley parser for RFC 3987 (the stall)."""

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import ipybox_core.mcp.connection as connection
    from ipybox_core.errors import McpProtocolError
    from ipybox_core.mcp.config import parse_server_config

    async def main() -> dict:
        config = parse_server_config("raw", json.loads(sys.argv[1]))
        report = {}
        conn = connection.McpConnection("raw", config, call_timeout=60)
        try:
            report["structured"] = (await conn.call("structured", {})).structured
            try:
                await conn.call("structured_only", {})
            except McpProtocolError as exc:
                report["refused"] = str(exc)
        finally:
            await conn.aclose()
        report["jsonschema"] = "jsonschema" in sys.modules
        report["grammar"] = "rfc3987_syntax.syntax_helpers" in sys.modules
        import jsonschema
        checker = jsonschema.FormatChecker()
        report["iri"] = [checker.conforms(v, "iri") for v in ("https://example.org/ä", "https://exa mple.org")]
        report["grammar_after_iri"] = "rfc3987_syntax.syntax_helpers" in sys.modules
        return report

    print(json.dumps(asyncio.run(main())))
    """
)


def run_fresh(script: str, *server_args: str) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter against the raw test server; its JSON report."""
    server = {"command": PYTHON, "args": [str(RAW_SERVER_SCRIPT), *server_args]}
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(server)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return report


def test_a_structured_result_is_validated_without_building_the_iri_grammar() -> None:
    require(
        importlib.util.find_spec("rfc3987_syntax") is not None,
        "rfc3987_syntax is not installed (jsonschema[format-nongpl], pulled in by ipybox[gateway])",
    )
    report = run_fresh(SCRIPT, "--clean", "--strict-output")
    assert report["structured"] == {"answer": 42}, report
    assert "Invalid structured content" in report["refused"], report  # still validated
    assert report["jsonschema"] is True, report
    assert report["grammar"] is False, report  # the stall: the grammar was not built
    assert report["iri"] == [True, False], report  # format checks keep working...
    assert report["grammar_after_iri"] is True, report  # ...on the grammar, built when first needed


CONNECT_ONLY = textwrap.dedent(
    """
    import asyncio, json, sys, threading
    import ipybox_core.mcp.connection as connection
    from ipybox_core.mcp.config import parse_server_config

    async def main() -> dict:
        config = parse_server_config("raw", json.loads(sys.argv[1]))
        conn = connection.McpConnection("raw", config, call_timeout=60)
        try:
            tools = await conn.connect()
        finally:
            await conn.aclose()
        for thread in threading.enumerate():
            if thread.name == "ipybox-import-jsonschema":
                thread.join(timeout=120)
        return {
            "output_schemas": any(tool.output_schema is not None for tool in tools),
            "jsonschema": "jsonschema" in sys.modules,
        }

    print(json.dumps(asyncio.run(main())))
    """
)


def test_connecting_to_tools_with_output_schemas_imports_jsonschema_before_any_call() -> None:
    """The first structured result of a process (often right after a human's approval, in a worker
    that just resumed the flow) does not wait for ``import jsonschema``: connecting starts it."""
    report = run_fresh(CONNECT_ONLY, "--clean", "--strict-output")
    assert report == {"output_schemas": True, "jsonschema": True}, report
    control = run_fresh(CONNECT_ONLY, "--clean")  # no output schema: nothing to import
    assert control == {"output_schemas": False, "jsonschema": False}, control
