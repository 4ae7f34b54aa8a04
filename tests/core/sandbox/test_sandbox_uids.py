"""Per-conversation sandbox uids: when the application is root, each kernel leases its own uid of
``SandboxPolicy.sandbox_uid ... + sandbox_uids - 1``, so per-user kernel quotas (inotify instances)
are per conversation; a full range makes kernels share one, with a warning."""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_kit import require_bwrap

from ipybox_core import Sessions
from ipybox_core.sandbox import ResourceLimits, SandboxPolicy
from ipybox_core.sandbox._uids import lease_uid
from prerequisites import require

pytestmark = [pytest.mark.sandbox]

HOARD_INOTIFY = (
    "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nheld = []\n"
    "while len(held) < 4096:\n    fd = libc.inotify_init1(0)\n    if fd < 0:\n        break\n"
    "    held.append(fd)\nprint(len(held), os.strerror(ctypes.get_errno()))\n"
)
ONE_INOTIFY = (
    "import ctypes, os\nfd = ctypes.CDLL(None, use_errno=True).inotify_init1(0)\n"
    "print('created' if fd >= 0 else os.strerror(ctypes.get_errno()))\n"
)


def _fresh_base() -> int:
    """A range of uids no other test (or process) of this host uses."""
    return 1_500_000_000 + secrets.randbelow(400_000_000)


@pytest.mark.parametrize("uids", [8, 1], ids=["own-uids", "control-one-uid"])
async def test_one_conversation_hoarding_inotify_leaves_the_others_theirs(tmp_path: Path, uids: int) -> None:
    require_bwrap()
    require(os.geteuid() == 0, "sandbox uids are used when the application runs as root")
    policy = SandboxPolicy(
        limits=ResourceLimits(max_processes=64), sandbox_uid=_fresh_base(), sandbox_uids=uids
    )
    async with Sessions(root=tmp_path / "root", warm=0, sandbox=policy, approval="never") as sessions:
        hoarder, other = await sessions.session("hoarder"), await sessions.session("other")
        hoarder_uid = int((await hoarder.executor.execute("import os\nprint(os.getuid())")).text)
        other_uid = int((await other.executor.execute("import os\nprint(os.getuid())")).text)
        hoarded = await hoarder.executor.execute(HOARD_INOTIFY)  # ``held`` stays open in the kernel
        count, _, reason = hoarded.text.strip().partition(" ")
        assert int(count) >= 100 and reason == "Too many open files", hoarded.text
        created = (await other.executor.execute(ONE_INOTIFY)).text.strip()
    assert policy.sandbox_uid is not None
    for uid in (hoarder_uid, other_uid):
        assert policy.sandbox_uid <= uid < policy.sandbox_uid + uids
    if uids == 1:  # control: one uid for both, one quota: the other conversation is starved
        assert hoarder_uid == other_uid
        assert created == "Too many open files"
        return
    assert hoarder_uid != other_uid
    assert created == "created"


def test_leases_are_exclusive_across_processes_and_a_full_range_is_shared_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    require(os.geteuid() == 0, "sandbox uids are used when the application runs as root")
    base = _fresh_base()
    # another process holds the range's first uid (its lock dies with it)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom ipybox_core.sandbox._uids import lease_uid\n"
            f"lease = lease_uid({base}, 3)\nprint(lease.uid, flush=True)\nsys.stdin.readline()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert int(holder.stdout.readline()) == base
        second, third = lease_uid(base, 3), lease_uid(base, 3)
        assert (second.uid, third.uid) == (base + 1, base + 2)
        assert not second.shared and not third.shared
        again = lease_uid(base, 3, owner=second.uid)  # a relaunch in a workspace second owns
        assert again.uid == second.uid
        with caplog.at_level(logging.WARNING, logger="ipybox_core.sandbox._uids"):
            full = lease_uid(base, 3)
        assert full.shared and full.uid in (base + 1, base + 2)
        assert "raise SandboxPolicy.sandbox_uids" in caplog.text
        third.release()
        assert lease_uid(base, 3).uid == base + 2  # a released uid is free again
    finally:
        holder.kill()
        holder.wait()
    assert lease_uid(base, 3).uid == base  # the killed process's lock is gone
