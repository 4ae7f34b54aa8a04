"""Approval rules from a TOML or JSON file (``ipybox serve --approval-rules FILE``).

The file uses the vocabulary of :class:`~ipybox_core.approval.ApprovalRules`::

    allow_read_only = true              # MCP tools annotated readOnlyHint run without asking
    allow = ["shop.list_*", "github.search_*"]
    deny = ["shop.delete_*", "shell:rm *"]
    default = "ask"                     # "ask", "allow" or "deny" for every other call

Every problem of the file is reported at once, one line each (:class:`RulesFileError`).
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, get_args

from ipybox_core.approval.policy import ApprovalRules, RuleAction
from ipybox_core.errors import ConfigError

_ACTIONS: tuple[str, ...] = get_args(RuleAction)
_KEYS = ("allow", "deny", "allow_read_only", "default")


class RulesFileError(ConfigError):
    """An approval rules file is unreadable or invalid; ``problems`` holds one line per problem."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        if len(problems) == 1:
            super().__init__(f"invalid approval rules {path}: {problems[0]}")
        else:  # the layout of an invalid sandbox policy
            lines = [f"invalid approval rules {path} ({len(problems)} problems):"]
            super().__init__("\n".join([*lines, *(f"  {problem}" for problem in problems)]))


def load_rules(path: str | os.PathLike[str]) -> ApprovalRules:
    """The :class:`ApprovalRules` in ``path`` (``.json``: JSON; anything else: TOML).

    Raises:
        RulesFileError: the file is missing, is not valid TOML/JSON, or holds unknown keys or
            values of the wrong type (every problem is listed).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RulesFileError(file, [f"cannot read it: {reason}"]) from None
    return parse_rules(_decode(file, text), file)


def parse_rules(data: object, path: Path = Path("<rules>")) -> ApprovalRules:
    """The :class:`ApprovalRules` that the decoded file ``data`` describes (see :func:`load_rules`)."""
    if not isinstance(data, dict):
        raise RulesFileError(path, [f"must be a table (object) of {', '.join(_KEYS)}"])
    problems = [f"unknown key {key!r} (known: {', '.join(_KEYS)})" for key in data if key not in _KEYS]
    allow = _patterns(data, "allow", problems)
    deny = _patterns(data, "deny", problems)
    read_only = data.get("allow_read_only", False)
    if not isinstance(read_only, bool):
        problems.append(f"allow_read_only must be true or false, not {read_only!r}")
    default = data.get("default", "ask")
    if default not in _ACTIONS:
        problems.append(f"default must be one of {', '.join(map(repr, _ACTIONS))}, not {default!r}")
    if problems:
        raise RulesFileError(path, problems)
    return ApprovalRules(allow=allow, deny=deny, allow_read_only=read_only, default=default)


def _decode(file: Path, text: str) -> object:
    if file.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise RulesFileError(file, [f"not valid JSON: {exc}"]) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesFileError(file, [f"not valid TOML: {exc}"]) from None


def _patterns(data: dict[str, Any], key: str, problems: list[str]) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list):
        problems.append(f"{key} must be a list of patterns such as ['shop.list_*'], not {value!r}")
        return ()
    for index, pattern in enumerate(value):
        if not isinstance(pattern, str) or not pattern:
            problems.append(f"{key}[{index}] must be a non-empty pattern string, not {pattern!r}")
    return tuple(pattern for pattern in value if isinstance(pattern, str))
