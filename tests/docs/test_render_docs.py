"""scripts/render_docs.py: include lines become the example's code between markers, kept up to date."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from docs_kit import ROOT, load, render_docs

EXAMPLE = """import os

# --8<-- [start:greet]
def greet(name: str) -> str:
    # --8<-- [start:body]
    return f"hello {name}"
    # --8<-- [end:body]
# --8<-- [end:greet]
"""

PAGE = """# A page

```python
--8<-- "examples/hello.py:greet"
```

??? example "The whole file"

    ```python
    --8<-- "examples/hello.py"
    ```
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "hello.py").write_text(EXAMPLE, encoding="utf-8")
    return tmp_path


def test_an_include_is_rendered_between_markers_and_a_second_run_changes_nothing(root: Path) -> None:
    text, problems, snippets = render_docs.render(PAGE, root)
    assert text.splitlines()[2:8] == [
        "<!-- snippet: examples/hello.py:greet -->",
        "```python",
        "def greet(name: str) -> str:",
        '    return f"hello {name}"',
        "```",
        "<!-- /snippet -->",
    ]
    assert "    <!-- snippet: examples/hello.py -->\n    ```python\n    import os\n\n    def greet" in text
    assert "--8<--" not in text
    assert [problem.message for problem in problems] == [
        '--8<-- "examples/hello.py:greet" is not rendered',
        '--8<-- "examples/hello.py" is not rendered',
    ]
    assert [snippet.specs for snippet in snippets] == [("examples/hello.py:greet",), ("examples/hello.py",)]
    again, problems, _ = render_docs.render(text, root)
    assert again == text and problems == []


def test_a_changed_example_makes_the_block_stale_and_a_run_updates_it(root: Path) -> None:
    text = render_docs.render(PAGE, root)[0]
    (root / "examples" / "hello.py").write_text(
        EXAMPLE.replace("hello {name}", "hi {name}"), encoding="utf-8"
    )
    updated, problems, _ = render_docs.render(text, root)
    assert [(problem.line, problem.message) for problem in problems] == [
        (3, "examples/hello.py:greet is stale (the example changed)"),
        (12, "examples/hello.py is stale (the example changed)"),
    ]
    assert 'return f"hi {name}"' in updated and "hello {name}" not in updated
    assert render_docs.render(updated, root)[1] == []


def test_a_hand_edit_between_the_markers_is_stale(root: Path) -> None:
    text = render_docs.render(PAGE, root)[0].replace('return f"hello', 'return f"bye', 1)
    _, problems, _ = render_docs.render(text, root)
    assert [problem.line for problem in problems] == [3]


def test_a_fence_is_longer_than_any_fence_in_the_code(root: Path) -> None:
    (root / "examples" / "doc.py").write_text('TEXT = """\n```python\nx = 1\n```\n"""\n', encoding="utf-8")
    text = render_docs.render('```python\n--8<-- "examples/doc.py"\n```\n', root)[0]
    assert text.splitlines()[1] == "````python" and text.splitlines()[-2] == "````"
    assert render_docs.render(text, root)[:2] == (text, [])


def test_other_blocks_and_an_include_outside_a_block(root: Path) -> None:
    page = '```markdown\n--8<-- "examples/hello.py"\nmore\n```\n\n--8<-- "examples/hello.py"\n'
    text, problems, snippets = render_docs.render(page, root)
    assert text == page and snippets == []
    assert [problem.line for problem in problems] == [6]


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ('```python\n--8<-- "examples/nope.py"\n```\n', "examples/nope.py does not exist"),
        ('```python\n--8<-- "examples/hello.py:nope"\n```\n', "has no section 'nope'"),
        ("<!-- snippet: examples/hello.py -->\ntext\n", "must be followed by a fenced block"),
        ("<!-- snippet: examples/hello.py -->\n```python\nx\n```\n", "must be followed by a fenced block"),
    ],
)
def test_what_cannot_be_rendered_is_a_snippet_error(root: Path, page: str, message: str) -> None:
    with pytest.raises(render_docs.SnippetError, match=message):
        render_docs.render(page, root)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "render_docs.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_command_checks_renders_and_checks_again(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        '# A page\n\n```python\n--8<-- "examples/quickstart.py:quickstart"\n```\n', encoding="utf-8"
    )
    check = run("--check", str(page))
    assert check.returncode == 1
    assert 'page.md:4: --8<-- "examples/quickstart.py:quickstart" is not rendered' in check.stderr
    assert page.read_text(encoding="utf-8").count("--8<--") == 1  # --check writes nothing
    assert run(str(page)).returncode == 0
    assert "<!-- snippet: examples/quickstart.py:quickstart -->" in page.read_text(encoding="utf-8")
    assert run("--check", str(page)).returncode == 0
    page.write_text('```python\n--8<-- "examples/quickstart.py:nope"\n```\n', encoding="utf-8")
    broken = run(str(page))
    assert broken.returncode == 2 and "has no section 'nope'" in broken.stderr


def test_the_site_hook_drops_the_markers_and_warns_about_an_unrendered_include(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hook = load(ROOT / "docs" / "hooks" / "snippets.py", "snippets_hook")
    page = SimpleNamespace(file=SimpleNamespace(src_uri="page.md"))
    rendered = render_docs.render('```python\n--8<-- "examples/quickstart.py:quickstart"\n```\n')[0]
    with caplog.at_level(logging.WARNING):
        shown = hook.on_page_markdown(rendered, page=page)
    assert shown.startswith("```python\n") and "snippet" not in shown and not caplog.records
    with caplog.at_level(logging.WARNING):
        hook.on_page_markdown('```python\n--8<-- "examples/quickstart.py:quickstart"\n```\n', page=page)
    assert ["is not rendered" in record.getMessage() for record in caplog.records] == [True]
