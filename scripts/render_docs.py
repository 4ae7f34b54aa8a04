"""Render the example code the docs show into the Markdown files, so every page reads as a plain file.

    python scripts/render_docs.py                 # render docs/ (and README.md) in place
    python scripts/render_docs.py docs/serving.md # only these files
    python scripts/render_docs.py --check         # exit 1 listing stale or unrendered snippets

A page asks for a snippet with a fenced block that holds only an include line, the
pymdownx.snippets syntax (a section is marked in the example by ``# --8<-- [start:NAME]`` and
``# --8<-- [end:NAME]`` lines; without ``:NAME`` the whole file)::

    ```python
    --8<-- "examples/service.py:workers"
    ```

The script replaces it by the example's current code between two markers that it keeps up to date on
every run (the markers are HTML comments, invisible on GitHub and on the site)::

    <!-- snippet: examples/service.py:workers -->
    ```python
    ...the code of the section...
    ```
    <!-- /snippet -->

Edit the example, never the code between the markers: the next run puts the example's code back,
and ``--check`` (run by tests/docs) fails while a page is stale or holds an unrendered include.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

INCLUDE = re.compile(r'^(?P<indent>[ \t]*)--8<-- "(?P<spec>[^"]+)"\s*$')
"""An include line (``--8<-- "examples/x.py:section"``): rendered by this script."""
SECTION_MARKER = re.compile(r"--8<-- \[(?P<kind>start|end):(?P<name>[\w-]+)\]")
"""A section marker in an example file; never shown."""
OPEN = re.compile(r"^(?P<indent>[ \t]*)<!-- snippet: (?P<specs>[^>]+?) -->\s*$")
CLOSE = re.compile(r"^[ \t]*<!-- /snippet -->\s*$")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


class SnippetError(Exception):
    """A snippet that cannot be rendered: a missing file or section, or a broken marker pair."""


@dataclass(frozen=True)
class Problem:
    """A snippet that ``--check`` reports, at a 1-based line of a file."""

    line: int
    message: str


@dataclass(frozen=True)
class Snippet:
    """A rendered snippet block of a page."""

    line: int
    """1-based line of its ``<!-- snippet: ... -->`` marker."""
    specs: tuple[str, ...]
    """What it shows: ``examples/x.py:section`` or ``examples/x.py`` (several: shown one after the other)."""
    code: str
    """The code between the fences, dedented to the marker's indentation."""


# --- the examples ---------------------------------------------------------------------------------


def example_code(spec: str, root: Path = ROOT) -> str:
    """The code ``--8<-- "spec"`` shows: the section (dedented) or the whole file, markers dropped."""
    path, _, section = spec.partition(":")
    file = root / path
    if not file.is_file():
        raise SnippetError(f"{path} does not exist")
    lines = file.read_text(encoding="utf-8").splitlines()
    if section:
        kept: list[str] = []
        inside = found = False
        for line in lines:
            marker = SECTION_MARKER.search(line)
            if marker is not None:
                if marker["name"] == section:
                    inside = marker["kind"] == "start"
                    found = found or inside
                continue
            if inside:
                kept.append(line)
        if not found:
            raise SnippetError(f"{path} has no section {section!r} (mark it with # --8<-- [start:{section}])")
        lines = kept
    else:
        lines = [line for line in lines if not SECTION_MARKER.search(line)]
    return textwrap.dedent("\n".join(lines)).strip("\n")


def _code_of(specs: Iterable[str], root: Path) -> str:
    return "\n".join(example_code(spec, root) for spec in specs)


# --- the pages ------------------------------------------------------------------------------------


def _fence_end(lines: list[str], start: int) -> int:
    """The index of the fence that closes the one opened at ``lines[start]`` (``len(lines)`` if none)."""
    fence = _FENCE.match(lines[start])
    assert fence is not None
    index = start + 1
    while index < len(lines):
        closing = _FENCE.match(lines[index])
        if (
            closing is not None
            and closing["fence"][0] == fence["fence"][0]
            and len(closing["fence"]) >= len(fence["fence"])
            and not closing["info"].strip()
        ):
            return index
        index += 1
    return index


def _block(indent: str, info: str, fence_char: str, specs: tuple[str, ...], code: str) -> list[str]:
    """The rendered lines of one snippet: markers, a fence long enough for the code, the code."""
    runs = [len(m.group(0)) for m in re.finditer(rf"^[ \t]*{re.escape(fence_char)}+", code, re.MULTILINE)]
    fence = fence_char * max(3, *(run + 1 for run in runs)) if runs else fence_char * 3
    body = [indent + line if line.strip() else "" for line in code.splitlines()]
    return [
        f"{indent}<!-- snippet: {' '.join(specs)} -->",
        f"{indent}{fence}{info}",
        *body,
        f"{indent}{fence}",
        f"{indent}<!-- /snippet -->",
    ]


def _dedent(lines: list[str], indent: str) -> str:
    return "\n".join(line[len(indent) :] if line.startswith(indent) else line.lstrip() for line in lines)


@dataclass
class _Page:
    lines: list[str]
    root: Path
    out: list[str]
    problems: list[Problem]
    snippets: list[Snippet]


def _rendered_snippet(page: _Page, index: int) -> int:
    """Re-render the snippet whose marker is ``lines[index]``; the index after its closing marker."""
    lines = page.lines
    opening = OPEN.match(lines[index])
    assert opening is not None
    specs = tuple(opening["specs"].split())
    fence = _FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
    end = _fence_end(lines, index + 1) if fence is not None else len(lines)
    if fence is None or end + 1 >= len(lines) or not CLOSE.match(lines[end + 1]):
        raise SnippetError(
            f"line {index + 1}: a <!-- snippet: ... --> marker must be followed by a fenced block "
            "and <!-- /snippet -->"
        )
    shown = _dedent(lines[index + 2 : end], opening["indent"])
    code = _code_of(specs, page.root)
    page.snippets.append(Snippet(index + 1, specs, shown))
    if shown != code:
        page.problems.append(Problem(index + 1, f"{' '.join(specs)} is stale (the example changed)"))
    page.out.extend(_block(opening["indent"], fence["info"], fence["fence"][0], specs, code))
    return end + 2


def _fenced_block(page: _Page, index: int) -> int:
    """Copy the fenced block at ``lines[index]``, rendering it if it holds only include lines."""
    lines = page.lines
    fence = _FENCE.match(lines[index])
    assert fence is not None
    end = _fence_end(lines, index)
    body = [line for line in lines[index + 1 : end] if line.strip()]
    includes = [INCLUDE.match(line) for line in body]
    if not body or not all(includes):
        page.out.extend(lines[index : end + 1])
        return end + 1
    specs = tuple(match["spec"] for match in includes if match is not None)
    code = _code_of(specs, page.root)
    page.problems.append(Problem(index + 2, f'--8<-- "{" ".join(specs)}" is not rendered'))
    page.snippets.append(Snippet(index + 1, specs, code))
    page.out.extend(_block(fence["indent"], fence["info"], fence["fence"][0], specs, code))
    return end + 1


def render(markdown: str, root: Path = ROOT) -> tuple[str, list[Problem], list[Snippet]]:
    """The page with every snippet rendered from the examples under ``root``, what ``--check`` would
    report about the page as it was, and its snippets. Raises SnippetError for what cannot be rendered."""
    lines = markdown.splitlines()
    page = _Page(lines, root, [], [], [])
    index = 0
    while index < len(lines):
        line = lines[index]
        if OPEN.match(line):
            index = _rendered_snippet(page, index)
        elif _FENCE.match(line):
            index = _fenced_block(page, index)
        else:
            if INCLUDE.match(line):
                message = "an include outside a fenced code block is not rendered: put it in one"
                page.problems.append(Problem(index + 1, message))
            page.out.append(line)
            index += 1
    text = "\n".join(page.out) + ("\n" if markdown.endswith("\n") else "")
    return text, page.problems, page.snippets


def without_markers(markdown: str) -> str:
    """The page with the ``<!-- snippet: ... -->`` / ``<!-- /snippet -->`` lines dropped (for the site
    and llms-full.txt: the code blocks alone)."""
    kept = [line for line in markdown.splitlines() if not (OPEN.match(line) or CLOSE.match(line))]
    return "\n".join(kept) + ("\n" if markdown.endswith("\n") else "")


def default_files() -> list[Path]:
    """Every Markdown page of docs/ (``docs/hooks`` holds code) and README.md."""
    pages = [path for path in DOCS.rglob("*.md") if "hooks" not in path.relative_to(DOCS).parts]
    return [*sorted(pages), ROOT / "README.md"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: docs/ and README.md)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a snippet is stale")
    args = parser.parse_args(argv)
    files = [path.resolve() for path in args.files] or default_files()
    reported: list[str] = []
    changed: list[str] = []
    for path in files:
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        markdown = path.read_text(encoding="utf-8")
        try:
            text, problems, _ = render(markdown)
        except SnippetError as error:
            print(f"{name}: {error}", file=sys.stderr)
            return 2
        reported += [f"{name}:{problem.line}: {problem.message}" for problem in problems]
        if text != markdown and not problems:
            reported.append(f"{name}: a snippet block is not in its rendered form")
        if text != markdown:
            changed.append(name)
            if not args.check:
                path.write_text(text, encoding="utf-8")
    if args.check:
        if reported:
            print("\n".join(reported), file=sys.stderr)
            print("run `python scripts/render_docs.py` to render them", file=sys.stderr)
            return 1
        return 0
    print("rendered: " + (", ".join(changed) or "nothing (already up to date)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
