"""Generate ``docs/llms.txt`` and ``docs/llms-full.txt`` (https://llmstxt.org) from the docs.

    python scripts/gen_llms_txt.py           # (re)write both files
    python scripts/gen_llms_txt.py --check   # exit 1 if they are not up to date

``llms.txt`` lists the pages of ``mkdocs.yml``'s nav with a one-line summary each. ``llms-full.txt``
is every page in nav order as plain Markdown: the example code the pages show (rendered by
``scripts/render_docs.py``) as the examples hold it now, and the API reference pages (``::: module.Name``) are
rendered from the docstrings with griffe, so an agent reading one file sees everything.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import griffe
import yaml
from render_docs import render, without_markers

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LLMS = DOCS / "llms.txt"
LLMS_FULL = DOCS / "llms-full.txt"

_DIRECTIVE = re.compile(r"^::: (?P<path>[\w.]+)\s*$")


@dataclass(frozen=True)
class Page:
    section: str
    title: str
    path: str
    """Relative to ``docs/``."""

    @property
    def url(self) -> str:
        """The page's URL relative to the site root (MkDocs' directory URLs)."""
        stem = self.path.removesuffix(".md")
        if stem == "index":
            return "./"
        return stem.removesuffix("/index") + "/"


def nav_pages() -> list[Page]:
    """The pages of ``mkdocs.yml``'s nav, in order."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages: list[Page] = []

    def walk(items: list[Any], section: str) -> None:
        for item in items:
            for title, value in item.items():
                if isinstance(value, list):
                    walk(value, title)
                else:
                    pages.append(Page(section, title, value))

    walk(config["nav"], "")
    return pages


# --- snippets -------------------------------------------------------------------------------------


def expand_snippets(markdown: str) -> str:
    """The page's snippets as the examples' current code (scripts/render_docs.py), markers dropped."""
    return without_markers(render(markdown)[0])


# --- API reference --------------------------------------------------------------------------------


class Reference:
    """Renders ``::: path`` directives (with an optional ``members:`` list) as Markdown text."""

    def __init__(self) -> None:
        self._loader = griffe.GriffeLoader(search_paths=[str(ROOT / "src")])
        self._packages: dict[str, Any] = {}

    def _get(self, path: str) -> Any:
        package = path.split(".")[0]
        if package not in self._packages:
            self._packages[package] = self._loader.load(package)
        obj = self._packages[package]
        rest = path.split(".")[1:]
        return obj[".".join(rest)] if rest else obj

    def render(self, path: str, members: list[str] | None) -> str:
        obj = self._get(path)
        if obj.is_module:
            names = members or [n for n, m in obj.members.items() if _public(n, m) and m.is_class]
            return "\n\n".join(self._object(obj.members[name], None, level=3) for name in names)
        return self._object(obj, members, level=3)

    def _object(self, obj: Any, members: list[str] | None, level: int) -> str:
        obj = obj.final_target if obj.is_alias else obj
        parts = [f"{'#' * level} `{obj.name}`", "```text\n" + _signature(obj) + "\n```"]
        if obj.docstring:
            parts.append(obj.docstring.value.strip())
        if obj.is_class:
            names = members if members is not None else [n for n, m in obj.members.items() if _public(n, m)]
            for name in names:
                member = obj.all_members.get(name)
                if member is None or not _public(name, member):
                    continue
                member = member.final_target if member.is_alias else member
                line = f"- `{_signature(member)}`"
                if member.docstring:
                    line += ": " + " ".join(member.docstring.value.strip().split())
                parts.append(line)
        return "\n\n".join(parts)


def _public(name: str, member: Any) -> bool:
    if name.startswith("_") or (member.is_alias and not member.resolved):
        return False
    # ``self.x = x`` in ``__init__`` without annotation or docstring says nothing worth listing
    return not (member.is_attribute and member.annotation is None and not member.docstring)


def _signature(obj: Any) -> str:
    if obj.is_function:
        labels = "async " if "async" in obj.labels else ""
        if "property" in obj.labels:
            return f"{obj.name}: {obj.returns}" if obj.returns else obj.name
        return f"{labels}def {obj.name}({_parameters(obj.parameters)}) -> {obj.returns}"
    if obj.is_class:
        init = obj.all_members.get("__init__")
        if init is not None and not init.is_alias and init.is_function:
            return f"class {obj.name}({_parameters(init.parameters)})"
        return f"class {obj.name}"
    annotation = f": {obj.annotation}" if getattr(obj, "annotation", None) else ""
    value = f" = {obj.value}" if getattr(obj, "value", None) is not None else ""
    return f"{obj.name}{annotation}{value}"


def _parameters(parameters: Any) -> str:
    rendered: list[str] = []
    star = False
    for parameter in parameters:
        if parameter.name in ("self", "cls"):
            continue
        kind = parameter.kind.value
        if kind == "keyword-only" and not star:
            rendered.append("*")
            star = True
        prefix = "*" if kind == "variadic positional" else "**" if kind == "variadic keyword" else ""
        star = star or prefix == "*"
        text = prefix + parameter.name
        if parameter.annotation is not None:
            text += f": {parameter.annotation}"
        if parameter.default is not None and not prefix:
            text += f" = {parameter.default}"
        rendered.append(text)
    return ", ".join(rendered)


def render_reference(markdown: str, reference: Reference) -> str:
    """Replace every ``::: path`` block (and its indented options) by the rendered object."""
    lines = markdown.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        directive = _DIRECTIVE.match(lines[index])
        if directive is None:
            out.append(lines[index])
            index += 1
            continue
        index += 1
        options: list[str] = []
        while index < len(lines) and (lines[index].startswith("    ") or not lines[index].strip()):
            options.append(lines[index])
            index += 1
        parsed = yaml.safe_load(textwrap.dedent("\n".join(options))) or {}
        members = (parsed.get("options") or {}).get("members")
        if members is False:  # ``members: false``: the object alone
            members = []
        out.extend([reference.render(directive["path"], members), ""])
    return "\n".join(out)


# --- the files ------------------------------------------------------------------------------------


def summary(markdown: str) -> str:
    """The first paragraph after the page's title, on one line (links reduced to their text)."""
    paragraph: list[str] = []
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code or line.startswith("#"):
            if paragraph:
                break
            continue
        if not line.strip():
            if paragraph:
                break
            continue
        paragraph.append(line.strip())
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", " ".join(paragraph))
    first = re.match(r"(.+?\.)(\s|$)", text)
    return first.group(1) if first else text


def llms_txt(pages: list[Page]) -> str:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    lines = [
        "# ipybox",
        "",
        f"> {' '.join(summary(index).split())}",
        "",
        "ipybox gives an agent one tool, `execute_code`: Python in a stateful IPython kernel (optionally",
        "in an OS sandbox) that calls MCP tools through a generated, typed API; every MCP call waits for",
        "the application's approval, through PydanticAI's, LangChain's or the OpenAI Agents SDK's own",
        "human-in-the-loop mechanism. Install: `pip install 'ipybox[pydantic-ai]'` (or `[langchain]`,",
        "`[openai-agents]`, `[all]`). Everything below is also in one file: [llms-full.txt](llms-full.txt).",
    ]
    sections: dict[str, list[Page]] = {}
    for page in pages:
        sections.setdefault(page.section or "Docs", []).append(page)
    for section, members in sections.items():
        lines += ["", f"## {section}", ""]
        for page in members:
            text = (DOCS / page.path).read_text(encoding="utf-8")
            lines.append(f"- [{page.title}]({page.url}): {summary(text)}")
    return "\n".join(lines) + "\n"


def llms_full_txt(pages: list[Page]) -> str:
    reference = Reference()
    parts = [
        "# ipybox documentation (all pages)\n\n"
        "Generated from docs/ by scripts/gen_llms_txt.py: every page of the site in navigation order, "
        "with the example code that the pages include and the API reference rendered from docstrings."
    ]
    for page in pages:
        text = (DOCS / page.path).read_text(encoding="utf-8")
        text = render_reference(expand_snippets(text), reference)
        parts.append(f"<!-- page: docs/{page.path} -->\n\n{text.strip()}")
    return "\n\n\n".join(parts) + "\n"


def generate() -> dict[Path, str]:
    """Both files' text. A nav page that does not exist (yet) is left out: ``mkdocs build --strict``
    reports it; once it exists, ``--check`` says that the files need regenerating."""
    pages = [page for page in nav_pages() if (DOCS / page.path).is_file()]
    return {LLMS: llms_txt(pages), LLMS_FULL: llms_full_txt(pages)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the files are up to date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in generate().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path.relative_to(ROOT))
        if not args.check:
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        names = ", ".join(map(str, stale))
        print(f"{names} not up to date: run `python scripts/gen_llms_txt.py`", file=sys.stderr)
        return 1
    if not args.check:
        print("updated: " + (", ".join(map(str, stale)) or "nothing (already up to date)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
