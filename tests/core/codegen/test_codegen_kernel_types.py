"""Types as a real MCP server receives them, from code in a real kernel (issue 27, item 7): the
fidelity server's ``record`` echoes each JSON value untouched, with its JSON type and a call count."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from kernel_kit import echo, executor_fixture, outcomes

from ipybox_core import CodeExecutor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "executor"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
from test_mcp_fidelity import FIDELITY_STDIO

pytestmark = pytest.mark.asyncio(loop_scope="module")

executor = executor_fixture("fid", FIDELITY_STDIO)


async def _echo(executor: CodeExecutor, call: str) -> dict[str, Any]:
    return await echo(executor, "import datetime as dt, uuid\nfrom mcptools.fid import record", call)


async def test_values_arrive_with_the_schemas_json_types(executor: CodeExecutor) -> None:
    echoed = await _echo(
        executor,
        "record(count=3.0, factor=5, dry_run=False, "
        "when=dt.datetime(2026, 12, 3, 14, 30, tzinfo=dt.timezone.utc), ident=uuid.UUID(int=255))",
    )
    assert echoed["count"] == [3, "integer"]  # not 3.0
    assert echoed["factor"] == [5, "integer"]  # an int for a number: was 5.0
    assert echoed["dry_run"] == [False, "boolean"]
    assert echoed["when"] == ["2026-12-03T14:30:00Z", "string"]  # a datetime object: was refused
    assert echoed["ident"] == ["00000000-0000-0000-0000-0000000000ff", "string"]
    big = await _echo(executor, f"record(factor={2**53 + 1}, count={2**64})")
    assert big["factor"] == [2**53 + 1, "integer"] and big["count"] == [2**64, "integer"]
    assert (await _echo(executor, "record(factor=2.5)"))["factor"] == [2.5, "float"]


async def test_lax_and_invalid_values_are_refused_in_the_kernel(executor: CodeExecutor) -> None:
    before = (await _echo(executor, "record()"))["call"]
    cases = ["{'dry_run': 'yes'}", "{'count': True}", "{'count': '3'}", "{'when': 'tomorrow'}"]
    cases += ["{'when': '2026-12-03T14:30:00'}", "{'ident': 'x'}", "{'factor': True}"]
    refused = await outcomes(executor, "fid", "record", cases)
    assert len(refused) == 7 and all(line.startswith("REFUSED") for line in refused), refused
    assert "REFUSED count Value error, expected an integer, not the bool True" in refused
    assert any("'tomorrow' is not a date-time" in line for line in refused)
    assert any("needs a UTC offset" in line for line in refused)
    assert (await _echo(executor, "record()"))["call"] == before + 1  # none of them reached the server


async def test_the_signature_shows_python_types(executor: CodeExecutor) -> None:
    reference = executor.api_reference()
    line = next(line for line in reference.splitlines() if "def record(" in line)
    assert "when: datetime | None = None" in line and "ident: UUID | None = None" in line
    assert "factor: float | None = None" in line and "dry_run: bool | None = None" in line
