"""Which environment variables reach MCP servers and which reach the kernel.

Secrets live in the host environment or in a workspace ``.env`` file. They fill ``${VAR}``
placeholders of MCP server configs (so they reach MCP servers) but never enter the kernel, whose
environment is built from scratch. A variable named ``KERNEL_ENV_<NAME>`` is the exception: it
reaches the kernel as ``<NAME>``.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dotenv.parser import parse_stream

from ipybox_core.errors import ConfigError

KERNEL_ENV_PREFIX = "KERNEL_ENV_"
"""Variables with this prefix reach the kernel, with the prefix stripped."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Environment:
    """The two environments ipybox hands out.

    ``mcp_env`` fills ``${VAR}`` placeholders of MCP server configs: the host environment, with
    ``.env`` values for variables the host does not set. ``kernel_env`` is what the kernel gets
    beyond its minimal environment: every ``KERNEL_ENV_<NAME>`` variable as ``<NAME>``.
    """

    mcp_env: dict[str, str] = field(default_factory=dict, repr=False)
    kernel_env: dict[str, str] = field(default_factory=dict, repr=False)
    dotenv: Path | None = None
    """The ``.env`` file that was read, if any."""


def load_environment(
    dotenv: str | os.PathLike[str] | None, *, environ: Mapping[str, str] | None = None
) -> Environment:
    """Combine the host environment (``environ``, default ``os.environ``) with a ``.env`` file.

    A missing ``.env`` file is fine (``dotenv`` is then ``None`` in the result); an unreadable or
    malformed one raises :class:`ConfigError` naming the line.
    """
    host = dict(os.environ if environ is None else environ)
    values: dict[str, str] = {}
    read: Path | None = None
    if dotenv is not None and Path(dotenv).is_file():
        read = Path(dotenv)
        values = parse_dotenv(read)
    merged = {**values, **host}
    kernel_env = {
        name[len(KERNEL_ENV_PREFIX) :]: value
        for name, value in merged.items()
        if name.startswith(KERNEL_ENV_PREFIX) and len(name) > len(KERNEL_ENV_PREFIX)
    }
    return Environment(mcp_env=merged, kernel_env=kernel_env, dotenv=read)


def parse_dotenv(path: Path) -> dict[str, str]:
    """Parse a ``.env`` file with python-dotenv's parser (``export``, quotes, ``#`` comments).

    No ``${VAR}`` expansion happens here. A line that is not ``NAME=value`` raises
    :class:`ConfigError` naming it (python-dotenv alone would skip it with a warning).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {str(path)!r}: {exc}") from None
    values: dict[str, str] = {}
    for binding in parse_stream(io.StringIO(text)):
        original = binding.original.string
        stripped = original.lstrip()
        leading_newlines = original[: len(original) - len(stripped)].count("\n")
        where = f"{path}:{binding.original.line + leading_newlines}"
        if binding.error:
            raise ConfigError(
                f"{where}: expected NAME=value (is a quote unterminated?), got {stripped.strip()!r}"
            )
        if binding.key is None:
            continue  # a comment or blank line
        if binding.value is None or not _NAME.fullmatch(binding.key):
            raise ConfigError(f"{where}: expected NAME=value, got {stripped.strip()!r}")
        values[binding.key] = binding.value
    return values
