"""The project's own lint and type checks run with the tests, so CI enforces them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    # only a hang guard: mypy with a cold cache took 245 s on the 2-core machine beside other suites
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False)


@pytest.mark.parametrize(
    "command",
    [
        ("ruff", "check", "src", "tests", "benchmarks", "examples"),
        ("ruff", "format", "--check", "src", "tests", "benchmarks", "examples"),
        ("mypy",),
    ],
    ids=["ruff-check", "ruff-format", "mypy"],
)
def test_tool_is_clean(command: tuple[str, ...]) -> None:
    executable = BIN / command[0]
    assert executable.exists(), f"{command[0]} is not installed in this environment (the test extra has it)"
    done = run_tool(str(executable), *command[1:])
    assert done.returncode == 0, f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}"


def test_tests_skip_only_through_the_strict_aware_helper() -> None:
    """A direct skip call bypasses strict mode (``IPYBOX_TEST_STRICT=1``, set by CI), where a missing
    prerequisite must fail the run: use ``prerequisites.require`` for a prerequisite, and a
    ``pytest.mark.skipif`` marker for a genuine platform condition (macOS-only tests on Linux)."""
    direct = re.compile(
        r"\bpytest\s*\.\s*(skip|importorskip)\s*\(|\bfrom\s+pytest\s+import\b.*\b(skip|importorskip)\b"
    )
    tests = ROOT / "tests"
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(tests.rglob("*.py"))
        if "node_modules" not in path.parts and path != tests / "prerequisites.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if direct.search(line)
    ]
    assert not offenders, "skip through prerequisites.require (or a skipif marker):\n" + "\n".join(offenders)
