"""The compact API reference of generated tool packages, for an agent's prompt."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ipybox_core.codegen.package import GeneratedPackage, GeneratedTool

_INTRO = (
    "# MCP tools as Python functions: keyword arguments only (a dict works where a model class is\n"
    "# expected); help(<function>) shows full docs.\n"
)
_REDUCED = "# Shortened to fit: help(<package>) lists a server's tools, help(<function>) shows one.\n"


def api_reference(
    packages: Sequence[GeneratedPackage], max_chars: int | None = None, package: str = "mcptools"
) -> str:
    """Signatures and one-line summaries of every tool of ``packages``, with the models they use.

    With ``max_chars``, falls back step by step (no models; names and summaries; names only;
    fewer names) until the text fits, and says how to see the rest. Deterministic.
    """
    ordered = sorted(packages, key=lambda p: p.module)
    levels: list[Callable[[GeneratedPackage], str]] = [
        lambda p: _server_section(p, package, signatures=True, models=True),
        lambda p: _server_section(p, package, signatures=True, models=False),
        lambda p: _server_section(p, package, signatures=False, models=False),
        lambda p: _imports(p, package),
    ]
    text = ""
    for index, level in enumerate(levels):
        intro = _INTRO if index == 0 else _INTRO + _REDUCED
        text = intro + "".join("\n" + level(p) for p in ordered)
        if max_chars is None or len(text) <= max_chars:
            return text
    return _truncated(ordered, package, max_chars or 0)


def _imports(pkg: GeneratedPackage, package: str, tools: Sequence[GeneratedTool] | None = None) -> str:
    names = ", ".join(t.function for t in (pkg.tools if tools is None else tools))
    return f"from {package}.{pkg.module} import {names}\n"


def _server_section(pkg: GeneratedPackage, package: str, *, signatures: bool, models: bool) -> str:
    # With signatures below, repeating every name in the import line would only cost prompt space.
    lines = [f"# from {package}.{pkg.module} import ...\n" if signatures else _imports(pkg, package)]
    for tool in pkg.tools:
        text = tool.summary.replace('"""', "'''")
        if signatures:
            lines.append(f"{tool.signature}:\n" + (f'    """{text}"""\n' if text else "    ...\n"))
        else:
            lines.append(f"{tool.function}: {text}\n" if text else f"{tool.function}\n")
    if models:
        used = dict.fromkeys(name for tool in pkg.tools for name in tool.models)
        lines.extend(pkg.models[name].line + "\n" for name in used if name in pkg.models)
    return "".join(lines)


def _truncated(packages: Sequence[GeneratedPackage], package: str, max_chars: int) -> str:
    """As many tool names as fit, server by server, then where to find the rest."""
    text = _INTRO + _REDUCED
    for pkg in packages:
        note = f"# ... {{}} more: help({package}.{pkg.module})\n"
        kept: list[GeneratedTool] = []
        for tool in pkg.tools:
            candidate = "\n" + _imports(pkg, package, [*kept, tool])
            rest = len(pkg.tools) - len(kept) - 1
            if len(text) + len(candidate) + (len(note.format(rest)) if rest else 0) > max_chars:
                break
            kept.append(tool)
        if kept:
            text += "\n" + _imports(pkg, package, kept)
        missing = len(pkg.tools) - len(kept)
        if missing and len(text) + len(note.format(missing)) + 1 <= max_chars:
            text += ("" if kept else "\n") + note.format(missing)
    if len(text) > max_chars:  # not even the introduction fits
        modules = ", ".join(f"{package}.{pkg.module}" for pkg in packages)
        text = f"# MCP tools: help() on {modules}\n"[:max_chars]
    return text
