"""The README is true: its demo command works on a fresh copy, its links resolve, CI runs its test command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from docs_kit import README, ROOT, marked_block

from prerequisites import require


def test_the_two_commands_are_marked_and_ci_runs_the_test_command() -> None:
    demo, tests = marked_block("demo-command"), marked_block("test-command")
    assert demo.startswith("python3 -m venv .venv") and demo.endswith("ipybox demo")
    assert "pytest" in tests and "[all,test]" in tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "<!-- test-command -->" in ci and 'bash -euo pipefail -c "$test_command"' in ci


def test_relative_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(local) >= 20
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_features_link_to_docs_pages() -> None:
    text = README.read_text(encoding="utf-8")
    table = text[text.index("## Features") :].split("\n\n")[1]
    rows = [row for row in table.splitlines()[2:] if row.startswith("|")]
    assert len(rows) >= 8
    for row in rows:
        assert re.search(r"\]\(docs/[\w/]+\.md(#[\w-]+)?\)", row), f"feature without a docs link: {row}"


def tracked_files() -> list[str]:
    done = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    require(done.returncode == 0, f"git ls-files failed: {done.stderr.strip()}")
    return [name for name in done.stdout.split("\0") if name]


@pytest.mark.slow
def test_demo_command_works_on_a_fresh_copy(tmp_path: Path) -> None:
    """The README's demo command, exactly as written, in a copy of the tracked files: a new
    virtualenv, ``pip install -e .`` (pip's cache is reused), then ``ipybox demo`` without a terminal.

    About a minute (the pip install). Select it alone with ``pytest -k fresh_copy``.
    """
    require(shutil.which("git") is not None, "git is not installed")
    copy = tmp_path / "ipybox"
    for name in tracked_files():
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not copied
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", marked_block("demo-command")],
        cwd=copy,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    out = done.stdout
    assert "(stdin is not a terminal: approving tool calls automatically)" in out
    assert "approve shop.list_products(category='books') [read-only]? [y/N] y (auto)" in out
    assert "approve shop.place_order(product_id='b-101', quantity=1) [destructive]? [y/N] y (auto)" in out
    assert "ordered 'Structure and Interpretation of Computer Programs': ord-1001" in out
    assert out.rstrip().endswith("done.")
    # the demo ran from the fresh copy, not from this checkout
    installed = subprocess.run(
        [str(copy / ".venv" / "bin" / "python"), "-c", "import ipybox_core; print(ipybox_core.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert installed.stdout.strip().startswith(str(copy)), installed
