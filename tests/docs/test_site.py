"""The site builds with ``mkdocs build --strict``, and llms.txt / llms-full.txt are up to date."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from docs_kit import DOCS, ROOT, doc_pages, render_docs

pytestmark = pytest.mark.slow


def page_text(site: Path, page: str) -> str:
    """The visible text of a built page's article."""
    raw = (site / page / "index.html").read_text(encoding="utf-8")
    article = re.search(r"<article.*?</article>", raw, re.DOTALL)
    assert article, page
    return html.unescape(re.sub(r"<[^>]+>", "", article.group(0)))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def test_snippets_are_expanded_into_the_pages(site: Path) -> None:
    quickstart = page_text(site, "quickstart")
    assert "from ipybox_core import ApprovalRequest, CodeExecutor, ExecutionResult, OutputChunk" in quickstart
    assert "--8<--" not in quickstart
    framework = page_text(site, "frameworks/pydantic_ai")
    assert "class TerminalApprover:" in framework and "[start:" not in framework


def test_each_snippet_is_shown_once_without_its_markers(site: Path) -> None:
    checked = 0
    for path in doc_pages():
        markdown = path.read_text(encoding="utf-8")
        url = path.relative_to(DOCS).with_suffix("").as_posix().removesuffix("index").rstrip("/")
        raw = (site / url / "index.html").read_text(encoding="utf-8")
        assert "<!-- snippet" not in raw and "<!-- /snippet" not in raw, url
        text = page_text(site, url)
        for snippet in render_docs.render(markdown)[2]:
            first = next(line.strip() for line in snippet.code.splitlines() if line.strip())
            assert text.count(first) == markdown.count(first), f"{path.name}:{snippet.line}: {first}"
            checked += 1
    assert checked >= 30


def test_api_reference_is_rendered_from_docstrings(site: Path) -> None:
    core = page_text(site, "reference/core")
    assert "Runs code in a stateful IPython kernel whose MCP tool calls wait for your approval." in core
    assert "Allow- and deny-lists over" in core  # ApprovalRules
    assert "The kernel process died" in core  # the errors module
    assert "One kernel per conversation key, on an ipybox service" in core  # RemoteSessions
    assert "Runs code in one session's kernel on an ipybox service" in core  # RemoteExecutor
    assert "One approval that waits in the service (an entry of the approvals inbox)" in core
    assert "could not be reached, refused the token" in core and "no longer exists" in core  # service errors
    for page in ("reference/core", "reference/runtime", "reference/integrations"):
        assert not re.search(r":(class|meth|func|attr|mod|exc):", page_text(site, page)), page
    integrations = page_text(site, "reference/integrations")
    for name in ("CodeAction", "CodeActionMiddleware", "CodeActionTool", "approval_results"):
        assert name in integrations


def test_llms_files_are_published(site: Path) -> None:
    assert (site / "llms.txt").read_text(encoding="utf-8") == (DOCS / "llms.txt").read_text(encoding="utf-8")
    assert (site / "llms-full.txt").is_file()


def test_llms_files_are_up_to_date() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/gen_llms_txt.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def nav_pages() -> list[str]:
    pages: list[str] = []

    def walk(items: list[dict[str, object]]) -> None:
        for item in items:
            for value in item.values():
                if isinstance(value, list):
                    walk(value)
                else:
                    pages.append(str(value))

    walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    return [page for page in pages if (DOCS / page).is_file()]  # a missing page fails the build test


def test_llms_txt_follows_the_format_and_lists_every_page() -> None:
    text = (DOCS / "llms.txt").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "# ipybox" and lines[2].startswith("> ")
    for page in nav_pages():
        url = "./" if page == "index.md" else page.removesuffix(".md") + "/"
        assert f"]({url}): " in text, f"llms.txt does not link {page}"


def test_llms_full_has_every_page_with_code_and_reference() -> None:
    text = (DOCS / "llms-full.txt").read_text(encoding="utf-8")
    for page in nav_pages():
        assert f"<!-- page: docs/{page} -->" in text
    assert "--8<--" not in text and not re.search(r"^::: ", text, re.MULTILINE)
    assert "async def main(auto_approve: bool) -> None:" in text  # examples/quickstart.py, included
    assert (
        "async def execute(code: str, *, timeout: float | None = None, approve_all: bool = False) -> ExecutionResult"
        in text
    )


def test_every_page_is_in_the_nav() -> None:
    pages = set(nav_pages())
    on_disk = {
        str(path.relative_to(DOCS))
        for path in DOCS.rglob("*.md")
        if "hooks" not in path.relative_to(DOCS).parts
    }
    assert on_disk <= pages, f"pages missing from mkdocs.yml's nav: {sorted(on_disk - pages)}"
