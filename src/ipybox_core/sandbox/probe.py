"""Can the OS sandbox run here? A quick start-up probe with actionable errors.

On Linux the probe starts ``bwrap`` with the namespaces and flags ipybox uses (about 10 ms) and, when
that fails, explains why (bubblewrap missing or too old, Ubuntu's AppArmor user-namespace
restriction, a container's seccomp profile, disabled user namespaces) and how to fix it. The result
is cached per process and bubblewrap path. ipybox never falls back to running unsandboxed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from ipybox_core._host_process import host_cwd, host_which
from ipybox_core.errors import SandboxUnavailable

PROC_SYS = Path("/proc/sys")
_PROBE_FLAGS = (
    "--die-with-parent",
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-net",
    "--unshare-cgroup-try",
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--ro-bind",
    "/",
    "/",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--size",
    "1048576",
    "--tmpfs",
    "/tmp",
    "--",
)
_cache: dict[str, SandboxUnavailable | None] = {}
_lock = threading.Lock()


def probe_sandbox(*, bwrap: str | None = None, use_cache: bool = True) -> None:
    """Raise :class:`SandboxUnavailable` (saying why and how to fix it) unless the sandbox works here.

    ``bwrap`` overrides the bubblewrap executable (default: ``bwrap`` on ``PATH``). On macOS this
    checks ``sandbox-exec``.
    """
    if sys.platform == "darwin":
        _probe_seatbelt()
        return
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(
            f"the ipybox sandbox supports Linux (bubblewrap) and macOS (Seatbelt), not {sys.platform}; "
            "run with sandbox=False or in a Linux container/VM"
        )
    key = bwrap or "bwrap"
    with _lock:
        if use_cache and key in _cache:
            error = _cache[key]
        else:
            error = _probe_bwrap(bwrap)
            _cache[key] = error
    if error is not None:
        raise error


def find_bwrap(bwrap: str | None = None) -> str:
    """The bubblewrap executable's absolute path; :class:`SandboxUnavailable` when it is not installed.

    ``bwrap`` is looked up on ``PATH`` without relative and sandbox-writable entries
    (:func:`~ipybox_core._host_process.host_which`): the host runs it as its own user.
    """
    found = host_which(bwrap or "bwrap")
    if found is None:
        where = f"at {bwrap}" if bwrap else "on PATH"
        raise SandboxUnavailable(
            f"bubblewrap (bwrap) is not installed {where}; the ipybox sandbox needs it on Linux.\n"
            "Install it: `sudo apt-get install bubblewrap` (Debian/Ubuntu), `sudo dnf install "
            "bubblewrap` (Fedora), `sudo pacman -S bubblewrap` (Arch), `apk add bubblewrap` "
            "(Alpine) — or run without the sandbox (sandbox=False)."
        )
    return found


def _probe_bwrap(bwrap: str | None) -> SandboxUnavailable | None:
    try:
        path = find_bwrap(bwrap)
    except SandboxUnavailable as error:
        return error
    try:
        done = subprocess.run(
            [path, *_PROBE_FLAGS, "true"],
            cwd=host_cwd(),
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": os.defpath, "LANG": "C"},
            check=False,
        )
    except OSError as exc:
        return SandboxUnavailable(f"cannot run bubblewrap at {path}: {exc}")
    except subprocess.TimeoutExpired:
        return SandboxUnavailable(f"bubblewrap at {path} did not finish a trivial sandbox within 30 s")
    if done.returncode == 0:
        return None
    return SandboxUnavailable(diagnose(path, done.returncode, done.stderr.strip()))


def diagnose(bwrap: str, returncode: int, stderr: str) -> str:
    """A readable explanation of a failed bubblewrap probe, with the fix."""
    head = f"bubblewrap ({bwrap}) cannot create the sandbox (exit code {returncode}): {stderr or 'no output'}"
    lower = stderr.lower()
    hints: list[str] = []
    if "unknown option" in lower or "unrecognized option" in lower:
        hints.append(
            "This bubblewrap is too old: ipybox needs bubblewrap >= 0.8 (for --disable-userns and "
            "--size). Upgrade it from your distribution or build it from "
            "https://github.com/containers/bubblewrap."
        )
    if _sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1" or "setting up uid map" in lower:
        hints.append(
            "Ubuntu 23.10+ restricts unprivileged user namespaces with AppArmor "
            "(kernel.apparmor_restrict_unprivileged_userns=1). Allow them with "
            "`sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (persist it in "
            "/etc/sysctl.d/), or install an AppArmor profile granting `userns` to bwrap "
            "(e.g. /etc/apparmor.d/bwrap with `profile bwrap /usr/bin/bwrap flags=(unconfined) "
            "{ userns, }`)."
        )
    if _sysctl("kernel/unprivileged_userns_clone") == "0":
        hints.append(
            "Unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0). "
            "Enable them with `sudo sysctl -w kernel.unprivileged_userns_clone=1`."
        )
    if _sysctl("user/max_user_namespaces") == "0":
        hints.append(
            "User namespaces are disabled (user.max_user_namespaces=0). Enable them with "
            "`sudo sysctl -w user.max_user_namespaces=15000`."
        )
    if (
        "no permissions to creat" in lower
        or "operation not permitted" in lower
        or "can't mount proc" in lower
        or "creating new namespace failed" in lower
    ) and not hints:
        if _in_container():
            hints.append(
                "This looks like a container whose seccomp profile forbids new namespaces (Docker's "
                "default does). Run the container with `--security-opt seccomp=unconfined` (or a "
                "profile allowing clone/unshare with CLONE_NEWUSER and mount), or run ipybox on the host."
            )
        else:
            hints.append(
                "The kernel refused to create user/PID/network namespaces. Check "
                "`sysctl user.max_user_namespaces`, security modules (AppArmor, SELinux) and any "
                "seccomp filter this process runs under."
            )
    if not hints:
        hints.append(
            "Run the probe command by hand to investigate: bwrap " + " ".join(_PROBE_FLAGS) + " true"
        )
    return (
        head
        + "\n"
        + "\n".join(hints)
        + "\nipybox does not run code unsandboxed when a sandbox was asked for."
    )


def _sysctl(name: str) -> str | None:
    try:
        return (PROC_SYS / name).read_text().strip()
    except OSError:
        return None


def _in_container() -> bool:
    return Path("/.dockerenv").exists() or Path("/run/.containerenv").exists()


def _probe_seatbelt() -> None:
    sandbox_exec = host_which("sandbox-exec")
    if sandbox_exec is None:
        raise SandboxUnavailable(
            "sandbox-exec (macOS Seatbelt) was not found; it ships with macOS at /usr/bin"
        )
    done = subprocess.run(
        [sandbox_exec, "-p", "(version 1)(allow default)", "/usr/bin/true"],
        cwd=host_cwd(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        raise SandboxUnavailable(f"sandbox-exec failed (exit code {done.returncode}): {done.stderr.strip()}")
