"""Reading the docs as data: fenced code blocks, rendered snippets and the README's marked blocks."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

CODE_LANGUAGES = frozenset({"python", "py", "python3", "pycon", "ipython", "ipython3"})
"""Fenced blocks in these languages are code: they must be snippets rendered from examples/."""

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def load(path: Path, name: str) -> ModuleType:
    """The Python file ``path`` as module ``name`` (scripts/ and docs/hooks/ are not packages)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


render_docs = load(ROOT / "scripts" / "render_docs.py", "render_docs")


@dataclass(frozen=True)
class Block:
    """A fenced code block of a Markdown file."""

    path: Path
    line: int
    """1-based line of the opening fence."""
    language: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_pages() -> list[Path]:
    """Every Markdown page of the site (``docs/hooks`` holds code, not pages)."""
    return sorted(path for path in DOCS.rglob("*.md") if "hooks" not in path.relative_to(DOCS).parts)


def fenced_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        language = (
            opening["info"].strip().split(" ")[0].strip("{}.").lower() if opening["info"].strip() else ""
        )
        body: list[str] = []
        start = index
        index += 1
        while index < len(lines):
            closing = _FENCE.match(lines[index])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                break
            body.append(lines[index][indent:] if lines[index][:indent].strip() == "" else lines[index])
            index += 1
        blocks.append(Block(path, start + 1, language, "\n".join(body)))
        index += 1
    return blocks


def marked_block(name: str) -> str:
    """The code block of README.md between ``<!-- name -->`` and ``<!-- /name -->`` (as .ci/run reads it)."""
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- {name} -->\s*```\w*\n(.*?)\n```\s*<!-- /{name} -->", text, re.DOTALL)
    assert match, f"README.md has no <!-- {name} --> block"
    return match.group(1).strip()
