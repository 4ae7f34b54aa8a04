"""Docs code is example code: every Python block of the docs is a snippet include of examples/.

Blocks in other languages (``text`` output, ``bash`` commands, ``json``/``toml`` data) are not code
in this sense. A Python block may only hold ``--8<-- "examples/<file>[:section]"`` lines, each file
exists, each section is marked in it, and each included script is run by a test.
"""

from __future__ import annotations

import pytest
from docs_kit import CODE_LANGUAGES, INCLUDE, README, ROOT, doc_pages, fenced_blocks, section_text

TESTS = ROOT / "tests"


def all_blocks() -> list:  # type: ignore[type-arg]
    return [block for page in doc_pages() for block in fenced_blocks(page)]


def includes() -> list[tuple[str, str, str | None]]:
    """(where, path, section) of every snippet include in the docs."""
    found = []
    for page in doc_pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            match = INCLUDE.match(line)
            if match:
                found.append((f"{page.relative_to(ROOT)}:{number}", match["path"], match["section"]))
    return found


def test_the_docs_have_code_blocks_and_includes() -> None:
    code = [block for block in all_blocks() if block.language in CODE_LANGUAGES]
    assert len(code) >= 30 and len(includes()) >= 30  # the parser sees the pages as they are


def test_every_python_block_is_a_snippet_include() -> None:
    handwritten = []
    for block in all_blocks():
        if block.language not in CODE_LANGUAGES:
            continue
        lines = [line for line in block.body.splitlines() if line.strip()]
        if not lines or not all(INCLUDE.match(line) for line in lines):
            handwritten.append(f"{block.where}: {lines[0] if lines else '(empty)'}")
    assert not handwritten, (
        'Python blocks in the docs must be included from examples/ (--8<-- "examples/x.py:section"); '
        "use ```text for output. Hand-written blocks:\n" + "\n".join(handwritten)
    )


def test_every_block_has_a_language() -> None:
    bare = [block.where for block in all_blocks() if not block.language]
    assert not bare, "give every fenced block a language (text for output): " + ", ".join(bare)


@pytest.mark.parametrize(("where", "path", "section"), includes(), ids=lambda value: str(value))
def test_include_points_at_an_example_that_a_test_runs(where: str, path: str, section: str | None) -> None:
    assert path.startswith("examples/"), f"{where}: snippets come from examples/, not {path}"
    file = ROOT / path
    assert file.is_file(), f"{where}: {path} does not exist"
    if section is not None:
        assert section_text(file, section).strip(), f"{where}: section {section!r} of {path} is empty"
    if file.suffix == ".py":
        sources = "\n".join(test.read_text(encoding="utf-8") for test in TESTS.rglob("test_*.py"))
        assert f'"{file.name}"' in sources, f"{where}: no test runs {path}"


def test_readme_example_is_the_quickstart_section() -> None:
    blocks = [block for block in fenced_blocks(README) if block.language in CODE_LANGUAGES]
    assert len(blocks) == 1, "README.md should show exactly one Python example"
    expected = section_text(ROOT / "examples" / "quickstart.py", "quickstart")
    assert blocks[0].body.strip("\n") == expected, (
        "README.md's example must be examples/quickstart.py's `quickstart` section, verbatim"
    )


def test_the_section_reader_rejects_a_missing_section() -> None:
    with pytest.raises(LookupError):
        section_text(ROOT / "examples" / "quickstart.py", "no-such-section")
