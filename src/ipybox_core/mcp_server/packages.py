"""``install_package``: pip-install requirements into the kernel's Python environment.

The install runs on the host (outside any sandbox) with the kernel's interpreter. What an agent
may pass is a list of PEP 508 requirements (``httpx``, ``pandas>=2``, ``name @ https://...``):
nothing that pip would read as an option. Options such as ``--index-url`` come only from the
operator (``extra_args``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement

from ipybox_core.errors import ConfigError

DEFAULT_INSTALL_TIMEOUT = 300.0
MAX_REQUIREMENTS = 50


@dataclass(frozen=True)
class InstallResult:
    """What one install did: the command line (without the interpreter), exit code and output."""

    requirements: list[str]
    returncode: int | None
    """pip's exit code; ``None`` when it timed out and was killed."""
    output: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def validate_requirements(requirements: Sequence[str]) -> list[str]:
    """Check that every item is a PEP 508 requirement and nothing else; return them normalised.

    Raises:
        ConfigError: an item is empty, starts with ``-`` (a pip option), spans lines, or is not a
            valid requirement; or there are none or too many.
    """
    if isinstance(requirements, str):
        requirements = [requirements]
    if not requirements:
        raise ConfigError("no packages given")
    if len(requirements) > MAX_REQUIREMENTS:
        raise ConfigError(f"at most {MAX_REQUIREMENTS} packages per install, got {len(requirements)}")
    checked: list[str] = []
    for item in requirements:
        if not isinstance(item, str):
            raise ConfigError(f"a package must be a string, got {item!r}")
        spec = item.strip()
        if not spec:
            raise ConfigError("empty package name")
        if spec.startswith("-"):
            raise ConfigError(f"{spec!r} looks like a pip option; only package requirements are accepted")
        if any(char in spec for char in "\r\n\0"):
            raise ConfigError(f"invalid package requirement {spec!r}: control characters")
        try:
            Requirement(spec)
        except InvalidRequirement as exc:
            raise ConfigError(f"invalid package requirement {spec!r}: {exc}") from None
        checked.append(spec)
    return checked


def pip_command(python: str = sys.executable) -> list[str]:
    """``python -m pip install``, or ``uv pip install --python python`` when pip is not installed
    in that environment (as in environments created by uv) and ``uv`` is on ``PATH``.
    """
    if python == sys.executable:
        has_pip = importlib.util.find_spec("pip") is not None
    else:
        folder = os.path.dirname(python)
        has_pip = any(os.path.exists(os.path.join(folder, name)) for name in ("pip", "pip3", "pip.exe"))
    if not has_pip:
        uv = shutil.which("uv")
        if uv is not None:
            return [uv, "pip", "install", "--python", python]
    return [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]


async def install_requirements(
    requirements: Sequence[str],
    *,
    python: str = sys.executable,
    extra_args: Sequence[str] = (),
    timeout: float = DEFAULT_INSTALL_TIMEOUT,
    output_limit: int = 20_000,
) -> InstallResult:
    """Run pip for ``requirements`` (validated first); output is captured, not printed.

    Raises:
        ConfigError: a requirement is invalid (nothing is run).
    """
    checked = validate_requirements(requirements)
    command = [*pip_command(python), *extra_args, "--", *checked]
    process = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PIP_NO_INPUT": "1", "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        _kill_group(process.pid)
        stdout, _ = await process.communicate()
        text = stdout.decode("utf-8", "replace")
        return InstallResult(checked, None, _tail(text, output_limit), timed_out=True)
    except BaseException:
        _kill_group(process.pid)
        await process.wait()
        raise
    return InstallResult(checked, process.returncode, _tail(stdout.decode("utf-8", "replace"), output_limit))


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"[... {len(text) - limit:,} characters omitted ...]\n" + text[-limit:]
