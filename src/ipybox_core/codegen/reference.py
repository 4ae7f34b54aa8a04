"""The compact API reference of generated tool packages, for an agent's prompt."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import zip_longest

from ipybox_core.codegen._source import one_line
from ipybox_core.codegen.package import GeneratedPackage, GeneratedTool

INTRO = (
    "# MCP tools as Python functions: keyword arguments only (a dict works where a model class is\n"
    "# expected); help(<function>) shows full docs. A str result's .structured holds any data\n"
    "# the server also sent. A failing tool raises ToolError (from ipybox_core.errors import\n"
    "# ToolError), a rejected call PermissionError.\n"
)
"""How every API reference starts: how the functions are called and fail."""
_REDUCED = "# Shortened to fit: help(<function>) shows a function in full, help(<Model>) a model's fields.\n"

_UNTYPED = "(schema not understood: arguments unchecked, see help())"

_SUMMARY, _SIGNATURE = 1, 2
"""Tool levels: 0 is the name in the import line only."""


@dataclass
class _Section:
    """One server's part of the reference: when each tool and model gets shown more fully."""

    pkg: GeneratedPackage
    upgrades: list[dict[int, int]] = field(default_factory=list)
    """Per tool: level → index of the upgrade that reaches it."""
    models: list[tuple[str, int]] = field(default_factory=list)
    """(model name, index of the upgrade that shows it), in first-use order."""


def api_reference(
    packages: Sequence[GeneratedPackage], max_chars: int | None = None, package: str = "mcptools"
) -> str:
    """Signatures and one-line summaries of every tool of ``packages``, with the models they use.

    With ``max_chars`` it is shortened tool by tool until it fits: first models are left out, then
    signatures (the tool keeps its summary line), then summaries (the name stays in the import
    line); servers take turns, so each keeps some of its detail. Below that, only as many names as
    fit. A larger budget never shows less. Deterministic. Tools a server lists that got no function
    (:attr:`GeneratedPackage.left_out`) are named on one ``# Left out`` line per server and reason
    (not in the names-only form).
    """
    sections, owners = _plan(sorted(packages, key=lambda p: p.module))
    total = len(owners)
    shown = total
    if max_chars is not None:  # the most upgrades that fit (lengths kept per section: one re-render each)
        lengths = [len(_section(s, package, 0)) + 1 for s in sections]
        fitting = [len(_intro(0, total)) + sum(lengths)]
        for step, owner in enumerate(owners, 1):
            lengths[owner] = len(_section(sections[owner], package, step)) + 1
            fitting.append(len(_intro(step, total)) + sum(lengths))
        fits = [step for step, length in enumerate(fitting) if length <= max_chars]
        if not fits:
            return _truncated([s.pkg for s in sections], package, max_chars)
        shown = fits[-1]
    return _intro(shown, total) + "".join("\n" + _section(s, package, shown) for s in sections)


def _intro(shown: int, total: int) -> str:
    return INTRO if shown == total else INTRO + _REDUCED


def _plan(packages: Sequence[GeneratedPackage]) -> tuple[list[_Section], list[int]]:
    """The order in which detail is added: summaries, then signatures, then models; servers in turn.

    Also returns, per upgrade, the index of the section it belongs to.
    """
    sections = [_Section(pkg, upgrades=[{} for _ in pkg.tools]) for pkg in packages]
    owners: list[int] = []
    step = 0
    for level in (_SUMMARY, _SIGNATURE):
        for row in zip_longest(*(range(len(s.pkg.tools)) for s in sections)):
            for number, (section, index) in enumerate(zip(sections, row, strict=True)):
                if index is None or (level == _SUMMARY and not section.pkg.tools[index].summary):
                    continue
                section.upgrades[index][level] = step
                owners.append(number)
                step += 1
    used: list[list[str]] = [
        [n for n in dict.fromkeys(m for t in s.pkg.tools for m in t.models) if n in s.pkg.models]
        for s in sections
    ]
    for names in zip_longest(*used):
        for number, (section, name) in enumerate(zip(sections, names, strict=True)):
            if name is not None:
                section.models.append((name, step))
                owners.append(number)
                step += 1
    return sections, owners


def _section(section: _Section, package: str, shown: int) -> str:
    """One server's part with the first ``shown`` upgrades (of all servers) applied."""
    pkg = section.pkg
    levels = [max((lv for lv, at in ups.items() if at < shown), default=0) for ups in section.upgrades]
    # A tool on its own line needs no place in the import line; when all are, a comment says where from.
    lines = [f"# from {package}.{pkg.module} import ...\n" if all(levels) else _imports(pkg, package)]
    for tool, level in zip(pkg.tools, levels, strict=True):
        text = tool.summary.replace('"""', "'''")
        if tool.degraded:  # its schema could not be read: the model should know nothing is checked
            text = f"{text} {_UNTYPED}".strip()
        if level == _SIGNATURE:
            lines.append(f"{tool.signature}:\n" + (f'    """{text}"""\n' if text else "    ...\n"))
        elif level == _SUMMARY:
            lines.append(f"{tool.function}: {text}\n")
    lines.extend(pkg.models[name].line + "\n" for name, at in section.models if at < shown)
    lines.extend(_left_out(pkg))
    return "".join(lines)


MAX_LEFT_OUT_CHARS = 240
"""The names on a server's ``# Left out:`` line, then how many more."""


def _left_out(pkg: GeneratedPackage) -> list[str]:
    """One line per reason: the tools the server lists that have no function, so none is looked for."""
    by_reason: dict[str, list[str]] = {}
    for name, why in pkg.left_out.items():
        by_reason.setdefault(why, []).append(one_line(name)[:60])
    lines = []
    for why, names in by_reason.items():
        shown: list[str] = []
        for name in names:
            if shown and sum(len(n) + 2 for n in [*shown, name]) > MAX_LEFT_OUT_CHARS:
                shown.append(f"... and {len(names) - len(shown)} more")
                break
            shown.append(name)
        lines.append(f"# Left out ({why}, no function): {', '.join(shown)}\n")
    return lines


def _imports(pkg: GeneratedPackage, package: str, tools: Sequence[GeneratedTool] | None = None) -> str:
    names = ", ".join(t.function for t in (pkg.tools if tools is None else tools))
    return f"from {package}.{pkg.module} import {names}\n"


def _truncated(packages: Sequence[GeneratedPackage], package: str, max_chars: int) -> str:
    """As many tool names as fit (servers in turn), and where to find the rest."""
    order = [
        (number, index)
        for row in zip_longest(*(range(len(pkg.tools)) for pkg in packages))
        for number, index in enumerate(row)
        if index is not None
    ]
    counts = [0] * len(packages)
    best = None
    for kept in range(len(order) + 1):  # the longest prefix that fits (lengths need not grow)
        if kept:
            counts[order[kept - 1][0]] += 1
        names = (_names(pkg, package, count) for pkg, count in zip(packages, counts, strict=True))
        text = INTRO + _REDUCED + "".join(names)
        if len(text) <= max_chars:
            best = text
    if best is None:  # not even the introduction fits
        modules = ", ".join(f"{package}.{pkg.module}" for pkg in packages)
        best = f"# MCP tools: help() on {modules}\n"[:max_chars]
    return best


def _names(pkg: GeneratedPackage, package: str, count: int) -> str:
    """A server's first ``count`` names and how many more there are."""
    text = "\n" + _imports(pkg, package, pkg.tools[:count]) if count else "\n"
    missing = len(pkg.tools) - count
    return text + (f"# ... {missing} more: help({package}.{pkg.module}) lists them\n" if missing else "")
