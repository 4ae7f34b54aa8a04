"""Where OAuth tokens and client registrations are kept: on the host only, never where the kernel can look.

A :class:`TokenStore` keeps one JSON record per key (a server's URL, grant and client); the
default, :class:`FileTokenStore`, writes one ``0600`` file per key in a ``0700`` directory under
the user's ipybox state directory (``$IPYBOX_STATE_DIR``, else ``$XDG_STATE_HOME/ipybox``, else
``~/.local/state/ipybox``), and refuses a directory a sandbox of this process can write. Home
directories are not visible in ipybox's sandbox; the kernel's environment never holds a token.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ipybox_core._host_process import HostRead, sandbox_can_write
from ipybox_core.errors import ConfigError


@runtime_checkable
class TokenStore(Protocol):
    """Keeps OAuth records (tokens, client registration) by key; implement it for a keyring or a database."""

    async def load(self, key: str) -> dict[str, Any] | None:
        """The record saved under ``key``, or ``None``."""
        ...

    async def save(self, key: str, record: dict[str, Any]) -> None:
        """Replace the record under ``key``."""
        ...


class MemoryTokenStore:
    """Records in this process only (gone when it exits): every run authorizes again."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}

    async def load(self, key: str) -> dict[str, Any] | None:
        record = self.records.get(key)
        return json.loads(json.dumps(record)) if record is not None else None

    async def save(self, key: str, record: dict[str, Any]) -> None:
        self.records[key] = json.loads(json.dumps(record))


class ConversationTokens:
    """One conversation's records in a shared :class:`TokenStore`: its keys are the store's keys with
    the conversation added, so no conversation loads another's tokens (``Sessions``, ``"account":
    "conversation"``)."""

    def __init__(self, store: TokenStore, conversation: str) -> None:
        self.store = store
        self.conversation = conversation

    def key(self, key: str) -> str:
        """The key in the shared store."""
        return f"{key} conversation={json.dumps(self.conversation)}"

    async def load(self, key: str) -> dict[str, Any] | None:
        return await self.store.load(self.key(key))

    async def save(self, key: str, record: dict[str, Any]) -> None:
        await self.store.save(self.key(key), record)


def ipybox_state_dir() -> Path:
    """The user's ipybox state directory (not created)."""
    explicit = os.environ.get("IPYBOX_STATE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "ipybox"


class FileTokenStore:
    """One ``0600`` JSON file per key in ``directory`` (default: ``<state dir>/oauth``, made ``0700``)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else ipybox_state_dir() / "oauth"

    def path(self, key: str) -> Path:
        """The file of ``key``."""
        return self.directory / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    async def load(self, key: str) -> dict[str, Any] | None:
        return await asyncio.to_thread(self._load, key)

    async def save(self, key: str, record: dict[str, Any]) -> None:
        await asyncio.to_thread(self._save, key, record)

    def _checked_directory(self) -> Path:
        directory = self.directory.absolute()
        writable = sandbox_can_write(HostRead("the OAuth token store", directory))
        if writable is not None:
            raise ConfigError(
                f"the OAuth token store {str(directory)!r} is inside {str(writable)!r}, which sandboxed code "
                "can write: set IPYBOX_STATE_DIR (or pass token_store=) to a directory outside the sandbox"
            )
        return directory

    def _load(self, key: str) -> dict[str, Any] | None:
        path = self._checked_directory() / self.path(key).name
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # unreadable or torn: authorize again rather than fail
        if not isinstance(document, dict) or document.get("key") != key:
            return None
        record = document.get("record")
        return record if isinstance(record, dict) else None

    def _save(self, key: str, record: dict[str, Any]) -> None:
        directory = self._checked_directory()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        path = directory / self.path(key).name
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump({"key": key, "record": record}, file)
        os.replace(temporary, path)
