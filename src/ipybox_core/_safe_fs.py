"""Host-side file operations in directories that hostile code may write (a sandbox's workspace).

The application, often root, must never follow a name that sandboxed code can write. :class:`SafeDir`
walks a path one component at a time from ``/`` (``openat`` style, ``O_NOFOLLOW | O_DIRECTORY``), so
a symlink, FIFO, device or socket anywhere on the way raises
:class:`~ipybox_core.errors.UnsafePathError` instead of being followed. Files are opened relative to
their directory's descriptor with ``O_NOFOLLOW | O_NONBLOCK`` (a planted FIFO never blocks) and
checked with ``fstat``: only regular files, and for reads and appends only files with one hard link.

The part of a path the *user* chose (the workspace, the audit log's directory) is trusted and resolved
once with :func:`anchored`; everything below it is walked without following anything.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import stat
from pathlib import Path, PurePath
from types import TracebackType

from ipybox_core.errors import UnsafePathError

MAX_TREE_DEPTH = 64
"""Directory levels :meth:`SafeDir.remove_tree` descends; deeper trees are refused (and left)."""

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)  # walk with search permission only, where the OS can
_WALK_FLAGS = _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LIST_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
_NOT_FOLLOWED = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK, errno.ENXIO, errno.EOPNOTSUPP)
_RENAME_EXCHANGE = 2


def anchored(path: str | os.PathLike[str], trusted: str | os.PathLike[str] | None = None) -> Path:
    """``path`` with its trusted part resolved (symlinks followed once, now) and the rest kept as is.

    The trusted part is the directory ``trusted`` when ``path`` lies inside it (lexically), else the
    parent of ``path``. Walk the result with :class:`SafeDir`: nothing below the trusted part is followed.
    """
    absolute = Path(os.path.abspath(path))
    base = Path(os.path.abspath(trusted)) if trusted is not None else absolute.parent
    if not absolute.is_relative_to(base):
        base = absolute.parent
    return Path(os.path.realpath(base)) / absolute.relative_to(base)


def describe(mode: int) -> str:
    """What a file of ``mode`` is, in words (``"a symbolic link"``, ``"a FIFO"``, ...)."""
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
    )
    return next((name for check, name in kinds if check(mode)), "not a regular file")


def _refuse(path: PurePath, problem: str) -> UnsafePathError:
    return UnsafePathError(f"refusing {path}: it is {problem} (hostile code may have planted it)")


class SafeDir:
    """An open directory, reached without following any symlink. ``path`` names it in messages.

    Use as a context manager (or call :meth:`close`). Every name given to a method is a single
    component inside this directory (``subdir`` also takes a relative path of several).
    """

    def __init__(self, fd: int, path: PurePath) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = False) -> SafeDir:
        """Open the directory ``path`` walking every component from ``/`` with ``O_NOFOLLOW``.

        Resolve the trusted part first (:func:`anchored`). ``create`` makes missing directories
        (``mkdir -p``, the umask applies). Raises :class:`UnsafePathError` for a symlink or
        non-directory on the way, :class:`FileNotFoundError` for a missing one without ``create``.
        """
        absolute = Path(os.path.abspath(path))
        top = cls(os.open(absolute.anchor or "/", _WALK_FLAGS), Path(absolute.anchor or "/"))
        with top:
            return top.subdir(absolute.relative_to(top.path), create=create)

    def close(self) -> None:
        """Close the directory's descriptor."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def subdir(self, relative: str | PurePath, *, create: bool = False) -> SafeDir:
        """Open the directory ``relative`` below this one, component by component (see :meth:`open`)."""
        current, shown = os.dup(self.fd), self.path
        try:
            for part in PurePath(relative).parts:
                if part in ("", "."):
                    continue
                if part in ("..", "/") or os.sep in part:
                    raise ValueError(f"{relative!s}: only plain names below {self.path} are walked")
                shown = shown / part
                child = _open_dir_at(current, part, shown, create=create)
                os.close(current)
                current = child
        except BaseException:
            os.close(current)
            raise
        return SafeDir(current, shown)

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry ``name`` itself (a symlink is not followed); ``None`` when there is none."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def check_entry(self, name: str, *kinds: int) -> os.stat_result | None:
        """``lstat(name)``, refused unless its type (``stat.S_IFREG``, ...) is one of ``kinds``."""
        found = self.lstat(name)
        if found is not None and stat.S_IFMT(found.st_mode) not in kinds:
            raise _refuse(self.path / name, describe(found.st_mode))
        return found

    def open_file(self, name: str, flags: int, mode: int = 0o666, *, single_link: bool = True) -> int:
        """A descriptor of the regular file ``name`` (``flags`` as for :func:`os.open`).

        Refused (:class:`UnsafePathError`, nothing followed, nothing blocks) when ``name`` is a
        symlink, FIFO, device, socket or directory, or, with ``single_link``, has more than one hard
        link. The descriptor stays non-blocking (no effect on regular files).
        """
        shown = self.path / name
        self.check_entry(name, stat.S_IFREG)
        try:
            fd = os.open(name, flags | _FILE_FLAGS, mode, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in _NOT_FOLLOWED:
                found = self.lstat(name)
                raise _refuse(shown, describe(found.st_mode) if found else "not a regular file") from None
            raise
        try:
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode):
                raise _refuse(shown, describe(found.st_mode))
            if single_link and found.st_nlink != 1:
                raise _refuse(shown, f"a file with {found.st_nlink} hard links")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_bytes(self, name: str, *, limit: int) -> bytes:
        """At most ``limit`` bytes of the regular, singly linked file ``name``."""
        fd = self.open_file(name, os.O_RDONLY)
        try:
            chunks: list[bytes] = []
            left = limit
            while left > 0 and (chunk := os.read(fd, min(left, 65536))):
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def append(self, name: str, data: bytes, mode: int = 0o666) -> None:
        """Append ``data`` to the regular file ``name`` (created when missing) in one ``write``."""
        fd = self.open_file(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def write_new(self, name: str, data: bytes, mode: int = 0o666) -> None:
        """Create the file ``name`` (it must not exist) holding ``data``; the umask applies."""
        fd = self.open_file(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def replace(self, name: str, data: bytes, mode: int = 0o666) -> None:
        """Atomically replace the entry ``name`` by a new file holding ``data`` (write, then rename).

        A symlink or FIFO at ``name`` is replaced as an entry, never followed or opened.
        """
        temporary = f".{name}.{secrets.token_hex(4)}.tmp"
        self.write_new(temporary, data, mode)
        try:
            os.replace(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=self.fd)
            raise

    def make_dir(self, prefix: str, suffix: str = "") -> str:
        """Create a new directory ``<prefix><random><suffix>`` here and return its name."""
        for _ in range(100):
            name = f"{prefix}{secrets.token_hex(4)}{suffix}"
            try:
                os.mkdir(name, 0o777, dir_fd=self.fd)
            except FileExistsError:
                continue
            return name
        raise FileExistsError(errno.EEXIST, f"no free directory name {prefix}*{suffix} in {self.path}")

    def rename(self, source: str, target: str) -> None:
        """Rename the entry ``source`` to ``target`` in this directory (a link is moved, not followed)."""
        os.rename(source, target, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def exchange(self, first: str, second: str) -> bool:
        """Atomically swap two entries (Linux ``renameat2(RENAME_EXCHANGE)``); ``False`` where unsupported."""
        try:
            renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
        except (OSError, AttributeError):
            return False
        renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        result = renameat2(self.fd, os.fsencode(first), self.fd, os.fsencode(second), _RENAME_EXCHANGE)
        return bool(result == 0)

    def remove_tree(self, name: str) -> None:
        """Remove the entry ``name``, and when it is a directory everything in it; nothing is followed.

        Missing is fine. Unlike :func:`shutil.rmtree` (which opens subdirectories without
        ``O_NONBLOCK``/``O_DIRECTORY``, so a directory swapped for a FIFO blocks it), no open can
        block; a tree deeper than :data:`MAX_TREE_DEPTH` raises :class:`UnsafePathError`.
        """
        _remove_at(self.fd, name, self.path / name, 0)


def _open_dir_at(dir_fd: int, name: str, shown: PurePath, *, create: bool) -> int:
    for _ in range(3):
        try:
            fd = os.open(name, _WALK_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=dir_fd)
            continue
        except OSError as exc:
            if exc.errno in _NOT_FOLLOWED:
                found = _lstat_at(dir_fd, name)
                raise _refuse(shown, describe(found.st_mode) if found else "not a directory") from None
            raise
        mode = os.fstat(fd).st_mode
        if not stat.S_ISDIR(mode):
            os.close(fd)
            raise _refuse(shown, describe(mode))
        return fd
    raise FileNotFoundError(errno.ENOENT, "directory vanished while being created", str(shown))


def _lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


def _remove_at(dir_fd: int, name: str, shown: PurePath, depth: int) -> None:
    try:
        fd = os.open(name, _LIST_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno not in _NOT_FOLLOWED:
            raise
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)  # a file, link, FIFO, ...: the entry goes, its target stays
        return
    try:
        if depth >= MAX_TREE_DEPTH:
            raise UnsafePathError(f"refusing to remove {shown}: deeper than {MAX_TREE_DEPTH} levels")
        with os.scandir(fd) as entries:
            children = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
        for child, is_dir in children:
            if not is_dir:
                try:
                    os.unlink(child, dir_fd=fd)
                    continue
                except FileNotFoundError:
                    continue
                except (IsADirectoryError, PermissionError):
                    pass  # swapped for a directory meanwhile
            _remove_at(fd, child, shown / child, depth + 1)
    finally:
        os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=dir_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
