"""Where the sessions' workspaces live: a host-only root, names that do not reveal the keys, and
directories the host itself made and moved into place.

The root holds one directory per conversation key, named by an HMAC of the key under a secret kept
in the root (``.ipybox-names``, mode 0600): a name says nothing about its key, and only the host can
compute the name of a key. Warm executors start in ``.warm-*`` directories the host creates here;
a session's directory is the warm one renamed. A directory kept from an earlier kernel of the same
key is merged in (its entries renamed into the new directory, never copied or followed); anything
else at a key's name (a symlink, a file) is refused. No kernel sees the root: each sees only its
own directory (mounted by the sandbox), so no conversation's workspace contains another's.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import re
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from ipybox_core._safe_fs import SafeDir, anchored, describe
from ipybox_core.errors import ConfigError, UnsafePathError
from ipybox_core.sandbox._ownership import give_tree

NAMES_FILE = ".ipybox-names"
"""The root's secret of workspace names (32 random bytes)."""
WARM_PREFIX = ".warm-"
_SECRET_BYTES = 32
_LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class WorkspaceRoot:
    """The open root directory of a :class:`~ipybox_core.sessions.Sessions` (see the module)."""

    def __init__(self, directory: SafeDir, secret: bytes, *, legacy_names: bool) -> None:
        self._dir = directory
        self._secret = secret
        self._legacy_names = legacy_names
        self.path = Path(directory.path)
        # workspaces an earlier process left here: their kernels are gone, their keys not yet back
        listing = os.open(".", _LIST_FLAGS, dir_fd=directory.fd)
        try:
            self._earlier = {name for name in os.listdir(listing) if not name.startswith(".")}
        finally:
            os.close(listing)

    @classmethod
    def open(cls, path: Path, *, legacy_names: bool) -> WorkspaceRoot:
        """Open (making it if needed) the root ``path``, refusing one that other users could write
        or that another user owns; ``legacy_names``: a kept root may hold workspaces named the
        old way (``<key>-<hash>``), renamed when their key comes back."""
        directory = SafeDir.open(anchored(path, path), create=True)
        try:
            info = os.fstat(directory.fd)
            if info.st_uid != os.geteuid() or info.st_mode & 0o022:
                raise ConfigError(
                    f"the sessions root {directory.path} must belong to this user and be writable by "
                    f"no one else (owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o}): use a "
                    "directory of your own, or chmod go-w it"
                )
            return cls(directory, _secret(directory), legacy_names=legacy_names)
        except BaseException:
            directory.close()
            raise

    def close(self) -> None:
        self._dir.close()

    def name_of(self, key: str) -> str:
        """The directory name of ``key``'s workspace."""
        return hmac.new(self._secret, key.encode(), hashlib.sha256).hexdigest()[:32]

    def new_warm(self) -> Path:
        """A fresh, empty, private directory ``.warm-*`` made here by the host."""
        for _ in range(100):
            name = f"{WARM_PREFIX}{secrets.token_hex(8)}"
            try:
                os.mkdir(name, 0o700, dir_fd=self._dir.fd)
            except FileExistsError:
                continue
            return self.path / name
        raise FileExistsError(errno.EEXIST, f"no free warm directory name in {self.path}")

    def move_into_place(
        self, key: str, workspace: Path, move: Callable[[Path], None], *, taken_from: Callable[[int], bool]
    ) -> bool:
        """Make the warm directory ``workspace`` the workspace of ``key`` (``move(target)`` renames
        it), merging in the directory kept from an earlier kernel of ``key``; its files are given
        to the owner of ``workspace`` when ``taken_from`` accepts their owner (a sandbox uid).
        Returns True when that directory was left by an earlier process (whose kernel is gone) and
        ``key`` comes back for the first time since.

        Raises:
            UnsafePathError: something other than a plain directory is at ``key``'s name.
        """
        if workspace.parent != self.path or not workspace.name.startswith(WARM_PREFIX):
            raise ValueError(f"{workspace} is not a warm directory of {self.path}")
        name = self.name_of(key)
        found = self._dir.lstat(name)
        earlier = name in self._earlier
        if found is None and self._legacy_names:
            earlier = legacy_name(key) in self._earlier
            found = self._migrate(legacy_name(key), name)
        if found is not None:
            self._merge(name, found, workspace.name, taken_from)
        move(self.path / name)
        self._earlier.discard(name)
        self._earlier.discard(legacy_name(key))
        return earlier and found is not None

    def remove(self, name: str) -> None:
        """Remove the directory ``name`` and everything in it, following nothing."""
        with contextlib.suppress(FileNotFoundError):
            self._dir.remove_tree(name)

    def _migrate(self, legacy: str, name: str) -> os.stat_result | None:
        found = self._dir.lstat(legacy)
        if found is None or not stat.S_ISDIR(found.st_mode):
            return None
        self._dir.rename(legacy, name)
        return self._dir.lstat(name)

    def _merge(self, name: str, found: os.stat_result, into: str, taken_from: Callable[[int], bool]) -> None:
        shown = self.path / name
        if not stat.S_ISDIR(found.st_mode):
            raise UnsafePathError(
                f"refusing {shown}: it is {describe(found.st_mode)}, not a workspace the host made "
                "(nothing was followed); remove it to give this conversation a new workspace"
            )
        try:
            old = os.open(name, _LIST_FLAGS, dir_fd=self._dir.fd)
        except OSError as exc:
            raise UnsafePathError(f"refusing {shown}: {exc.strerror} (nothing was followed)") from None
        try:
            new = os.open(into, _LIST_FLAGS, dir_fd=self._dir.fd)
            try:
                if (os.fstat(old).st_ino, os.fstat(old).st_dev) != (found.st_ino, found.st_dev):
                    raise UnsafePathError(f"refusing {shown}: it was replaced while being opened")
                for entry in os.listdir(old):
                    os.rename(entry, entry, src_dir_fd=old, dst_dir_fd=new)
                owner = os.fstat(new).st_uid
                if owner != os.geteuid():
                    give_tree(new, owner, lambda uid: uid != owner and taken_from(uid))
            finally:
                os.close(new)
        finally:
            os.close(old)
        os.rmdir(name, dir_fd=self._dir.fd)


def legacy_name(key: str) -> str:
    """The name ipybox gave ``key``'s workspace before names were keyed hashes."""
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", key)[:48].strip("_") or "session"
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _secret(directory: SafeDir) -> bytes:
    """The root's name secret, made (0600, exclusively) on first use."""
    if directory.lstat(NAMES_FILE) is None:
        with contextlib.suppress(FileExistsError):
            directory.write_new(NAMES_FILE, secrets.token_bytes(_SECRET_BYTES), 0o600)
    secret = directory.read_bytes(NAMES_FILE, limit=_SECRET_BYTES + 1)
    if len(secret) != _SECRET_BYTES:
        raise ConfigError(
            f"{directory.path / NAMES_FILE} is not a name secret ipybox made ({len(secret)} bytes); remove it"
        )
    return secret
