"""``${VAR}`` and ``${VAR:-default}`` placeholders in server configs, filled from an environment."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass
class PlaceholderFiller:
    """Fills placeholders in nested strings, lists and dicts, remembering every missing variable.

    Like the shell, ``${VAR:-default}`` uses the default when ``VAR`` is unset or empty. Text that
    is not a well-formed placeholder is left as it is.
    """

    environ: Mapping[str, str]
    missing: list[tuple[str, str]] = field(default_factory=list)
    """``(variable, where)`` for each placeholder without a value, in order of appearance."""

    def fill(self, value: Any, where: str) -> Any:
        """``value`` with placeholders filled; ``where`` names the field (``env.TOKEN``, ``args[2]``)."""
        if isinstance(value, str):
            return _PLACEHOLDER.sub(lambda match: self._value_of(match, where), value)
        if isinstance(value, list):
            return [self.fill(item, f"{where}[{index}]") for index, item in enumerate(value)]
        if isinstance(value, dict):
            return {key: self.fill(item, f"{where}.{key}") for key, item in value.items()}
        return value

    def _value_of(self, match: re.Match[str], where: str) -> str:
        name, default = match.group(1), match.group(2)
        value = self.environ.get(name)
        if value is None or (value == "" and default is not None):
            if default is not None:
                return default
            self.missing.append((name, where))
            return match.group(0)
        return value
