"""Docs code is example code: every Python block of the docs is a snippet rendered from examples/.

Blocks in other languages (``text`` output, ``bash`` commands, ``json``/``toml`` data) are not code
in this sense. A Python block must sit between ``<!-- snippet: examples/<file>[:section] -->`` and
``<!-- /snippet -->`` (written by scripts/render_docs.py), hold exactly the example's current code,
and each example it shows is run by a test. An include line (``--8<-- "examples/x.py:section"``)
left in a page is a page that shows no code on GitHub or in a checkout: it fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from docs_kit import CODE_LANGUAGES, README, ROOT, doc_pages, fenced_blocks, render_docs

TESTS = ROOT / "tests"


def all_blocks() -> list[Any]:
    return [block for page in doc_pages() for block in fenced_blocks(page)]


def rendered(page: Path) -> tuple[list[Any], list[Any]]:
    """(problems, snippets) of a page as scripts/render_docs.py sees it."""
    _, problems, snippets = render_docs.render(page.read_text(encoding="utf-8"))
    return problems, snippets


def snippet_specs() -> list[tuple[str, str]]:
    """(where, spec) of every snippet of the docs."""
    return [
        (f"{page.relative_to(ROOT)}:{snippet.line}", spec)
        for page in doc_pages()
        for snippet in rendered(page)[1]
        for spec in snippet.specs
    ]


def test_the_docs_have_code_blocks_and_snippets() -> None:
    code = [block for block in all_blocks() if block.language in CODE_LANGUAGES]
    assert len(code) >= 30 and len(snippet_specs()) >= 30  # the parser sees the pages as they are


def test_no_page_holds_an_unrendered_include_or_a_stale_snippet() -> None:
    problems = [
        f"{page.relative_to(ROOT)}:{problem.line}: {problem.message}"
        for page in [*doc_pages(), README]
        for problem in rendered(page)[0]
    ]
    assert not problems, (
        "pages must show the examples' current code: run `python scripts/render_docs.py`\n"
        + "\n".join(problems)
    )


def test_every_python_block_is_a_rendered_snippet() -> None:
    snippet_fences = {(page, snippet.line + 1) for page in doc_pages() for snippet in rendered(page)[1]}
    handwritten = []
    for block in all_blocks():
        if block.language in CODE_LANGUAGES and (block.path, block.line) not in snippet_fences:
            first = next((line for line in block.body.splitlines() if line.strip()), "(empty)")
            handwritten.append(f"{block.where}: {first}")
    assert not handwritten, (
        "Python blocks in the docs must come from examples/: write a block holding only\n"
        '--8<-- "examples/x.py:section" and run `python scripts/render_docs.py`; use ```text for '
        "output. Hand-written blocks:\n" + "\n".join(handwritten)
    )


def test_every_block_has_a_language() -> None:
    bare = [block.where for block in all_blocks() if not block.language]
    assert not bare, "give every fenced block a language (text for output): " + ", ".join(bare)


@pytest.mark.parametrize(("where", "spec"), snippet_specs(), ids=lambda value: str(value))
def test_snippet_shows_an_example_that_a_test_runs(where: str, spec: str) -> None:
    path = spec.partition(":")[0]
    assert path.startswith("examples/"), f"{where}: snippets come from examples/, not {path}"
    file = ROOT / path
    assert file.is_file(), f"{where}: {path} does not exist"
    assert render_docs.example_code(spec).strip(), f"{where}: {spec} shows no code"
    if file.suffix == ".py":
        sources = "\n".join(test.read_text(encoding="utf-8") for test in TESTS.rglob("test_*.py"))
        assert f'"{file.name}"' in sources, f"{where}: no test runs {path}"


def test_readme_example_is_the_quickstart_section() -> None:
    blocks = [block for block in fenced_blocks(README) if block.language in CODE_LANGUAGES]
    assert len(blocks) == 1, "README.md should show exactly one Python example"
    expected = render_docs.example_code("examples/quickstart.py:quickstart")
    assert blocks[0].body.strip("\n") == expected, (
        "README.md's example must be examples/quickstart.py's `quickstart` section, verbatim"
    )
