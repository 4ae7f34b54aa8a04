"""``install_package``: pip-install requirements into the kernel's Python environment.

The install runs on the host (outside any sandbox) with the kernel's interpreter. What an agent
may pass is a list of PEP 508 requirements (``httpx``, ``pandas>=2``, ``name @ https://...``):
nothing that pip would read as an option. Options such as ``--index-url`` come only from the
operator (``extra_args``).

pip (or uv) runs as every host-side tool does (:mod:`ipybox_core._host_process`): in ``/``, as
``python -I -m pip`` (``uv pip --no-config``), without ``PYTHON*`` variables and with a ``PATH``
free of sandbox-writable directories. It does not run at all when something it would read (the
interpreter's environment, pip's or uv's config and cache under the home directory, a path in
``extra_args``, a ``PIP_*``/``UV_*`` variable or a ``file:`` requirement) lies where sandboxed code
can write: that would run the sandbox's code on the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import re
import signal
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from packaging.requirements import InvalidRequirement, Requirement

from ipybox_core._host_process import (
    HOST_CWD,
    HostRead,
    host_cwd,
    host_environment,
    host_which,
    isolated_python,
    refuse_sandbox_writable,
)
from ipybox_core.errors import ConfigError
from ipybox_core.sandbox._pyenv import python_environment_paths

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
    """``python -I -u -m pip install``, or ``uv pip install --no-config --python python`` when pip is
    not installed in that environment (as in environments created by uv) and ``uv`` is on ``PATH``
    (outside sandbox-writable directories).
    """
    if python == sys.executable:
        has_pip = importlib.util.find_spec("pip") is not None
    else:
        folder = os.path.dirname(python)
        has_pip = any(os.path.exists(os.path.join(folder, name)) for name in ("pip", "pip3", "pip.exe"))
    if not has_pip:
        uv = host_which("uv")
        if uv is not None:
            return [uv, "pip", "install", "--no-config", "--python", python]
    return isolated_python(python, "-u", "-m", "pip", "install", "--disable-pip-version-check", "--no-input")


HOME_TOOL_PATHS = (".config", ".cache", ".local", ".pip", ".netrc", ".pydistutils.cfg")
"""What pip, uv and the libraries they load read below the home directory (config, caches, keyring
settings, credentials)."""
_ENV_DIRS = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")


def host_reads(
    command: Sequence[str],
    requirements: Sequence[str],
    *,
    python: str,
    extra_args: Sequence[str],
    env: Mapping[str, str],
) -> Iterator[HostRead]:
    """What running ``command`` (pip or uv, see :func:`pip_command`) reads that sandboxed code must
    not be able to write."""
    if command[0] != python:
        yield HostRead("the uv executable", Path(command[0]), tree=False)
    yield HostRead("the Python interpreter", Path(python), tree=False, python_env=True)
    environment = python_environment_paths(Path(python), env)
    for path in [*environment.prefixes, *environment.extra]:
        yield HostRead("the Python environment", path, python_env=True)
    home = env.get("HOME") or os.path.expanduser("~")
    if os.path.isabs(home):
        yield HostRead("the home directory", Path(home), tree=False)
        for name in HOME_TOOL_PATHS:
            yield HostRead(f"~/{name} (pip's and uv's config, caches and credentials)", Path(home, name))
    for name in _ENV_DIRS:
        if os.path.isabs(env.get(name, "")):
            yield HostRead(f"${name}", Path(env[name]))
    for folder in env.get("XDG_CONFIG_DIRS", "").split(os.pathsep):
        if os.path.isabs(folder):
            yield HostRead("$XDG_CONFIG_DIRS", Path(folder))
    for name, value in env.items():
        if name.startswith(("PIP_", "UV_")):
            yield from (HostRead(f"${name}", path) for path in _named_paths(value))
    for arg in extra_args:
        yield from (HostRead(f"the pip argument {arg!r}", path) for path in _named_paths(arg))
    for spec in requirements:
        url = Requirement(spec).url
        for path in _named_paths(url) if url else ():
            yield HostRead(f"the requirement {spec!r}", path)


def _named_paths(value: str) -> list[Path]:
    """Absolute paths and ``file:`` URLs in ``value`` (an option, a variable, a requirement URL)."""
    paths: list[Path] = []
    for token in re.split(r"[\s=]+", value):
        if token.lower().startswith("file:"):
            parts = urlsplit(token)
            if parts.netloc in ("", "localhost"):
                paths.append(Path(HOST_CWD, url2pathname(unquote(parts.path))))
        else:
            paths += [Path(part) for part in token.split(os.pathsep) if os.path.isabs(part)]
    return paths


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
        ConfigError: a requirement is invalid, or pip would read something sandboxed code can
            write (nothing is run).
    """
    checked = validate_requirements(requirements)
    tool = pip_command(python)
    env = {**host_environment(), "PIP_NO_INPUT": "1"}
    refuse_sandbox_writable(
        "uv" if tool[0] != python else "pip",
        host_reads(tool, checked, python=python, extra_args=extra_args, env=env),
    )
    process = await asyncio.create_subprocess_exec(
        *tool,
        *extra_args,
        "--",
        *checked,
        cwd=host_cwd(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
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
