"""The escape attempts run by ``test_sandbox_escapes.py``: what the code tries, and how the host checks.

Each attempt is kernel code defining ``attack()``; it is *blocked* when ``attack()`` raises. Some
attacks "succeed" harmlessly inside the sandbox (a write to the private ``/tmp``), so an attempt can
name a host path that must not appear (``host_absent``) or a secret that must not show up in what the
code got back (``leak``). ``control=True`` attempts are harmless to run unsandboxed: the suite runs
them in a plain kernel too and requires them to *escape* there, which proves each check can fail.
Placeholders (``$name``) are filled from the test's context.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Attempt:
    id: str
    code: str
    host_absent: str | None = None
    leak: str | None = None
    control: bool = False
    needs_victim: bool = False
    fills: bool = False


CTYPES_LIBC = """
import ctypes, ctypes.util, os
libc = ctypes.CDLL(None, use_errno=True)
def check(ret):
    if ret == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret
"""

# unshare() needs a single-threaded caller (the kernel has threads): try it in a fresh interpreter.
SINGLE_THREADED = '''
import subprocess, sys
CHILD = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(FLAG) == -1:
    raise SystemExit(os.strerror(ctypes.get_errno()))
"""
def attack():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
    if done.returncode:
        raise PermissionError(done.stderr.strip().splitlines()[-1])
    return "unshared"
'''

ATTEMPTS: list[Attempt] = [
    # --- writes outside the workspace ---------------------------------------------------------
    Attempt(
        "write-host-home",
        'def attack():\n    _write("$home/pwned-$token", "x")',
        host_absent="$home/pwned-$token",
        control=True,
    ),
    Attempt(
        "write-etc",
        'def attack():\n    _write("/etc/ipybox-pwned-$token", "x")',
        host_absent="/etc/ipybox-pwned-$token",
    ),
    Attempt(
        "write-site-packages",
        "import ipykernel, os\n"
        "def attack():\n"
        '    _write(os.path.join(os.path.dirname(ipykernel.__file__), "pwned_$token.py"), "x")',
        host_absent="$ipykernel_dir/pwned_$token.py",
    ),
    Attempt(
        "write-stdlib",
        'import os\ndef attack():\n    _write(os.path.join(os.path.dirname(os.__file__), "pwned_$token.py"), "x")',
        host_absent="$stdlib_dir/pwned_$token.py",
    ),
    Attempt(
        "write-filesystem-root",
        'def attack():\n    _write("/pwned-$token", "x")',
        host_absent="/pwned-$token",
    ),
    Attempt(
        "write-host-tmp-next-to-runtime-dir",
        'def attack():\n    _write("$runtime_parent/pwned-$token", "x")\n    return "written (private /tmp?)"',
        host_absent="$runtime_parent/pwned-$token",
    ),
    Attempt(
        "write-dev-shm",
        'def attack():\n    _write("/dev/shm/ipybox-pwned-$token", "x")\n    return "written (private?)"',
        host_absent="/dev/shm/ipybox-pwned-$token",
        control=True,
    ),
    Attempt(
        "overwrite-hidden-workspace-env",
        'def attack():\n    _write(".env", "overwritten")',
        host_absent=None,
    ),
    Attempt(
        "delete-hidden-workspace-env",
        'import os\ndef attack():\n    os.unlink(".env")',
    ),
    # --- reads of secrets -----------------------------------------------------------------------
    Attempt(
        "read-ssh-key",
        'def attack():\n    return open("$home/.ssh/id_rsa").read()',
        leak="$secret",
        control=True,
    ),
    Attempt(
        "list-ssh-dir",
        'import os\ndef attack():\n    return os.listdir("$home/.ssh")',
        leak="id_rsa",
        control=True,
    ),
    Attempt(
        "read-aws-credentials",
        'def attack():\n    return open("$home/.aws/credentials").read()',
        leak="$secret",
        control=True,
    ),
    Attempt(
        "read-netrc", 'def attack():\n    return open("$home/.netrc").read()', leak="$secret", control=True
    ),
    Attempt(
        "read-workspace-env", 'def attack():\n    return open(".env").read()', leak="$secret", control=True
    ),
    Attempt(
        "read-workspace-subdir-env",
        'def attack():\n    return open("sub/deeper/.env").read()',
        leak="$secret",
        control=True,
    ),
    Attempt(
        "read-env-file-variant",
        'def attack():\n    return open(".env.production").read()',
        leak="$secret",
        control=True,
    ),
    Attempt(
        "read-env-in-allowed-home-project",
        'def attack():\n    return open("$home/project/.env").read()',
        leak="$secret",
        control=True,
    ),
    Attempt("read-etc-shadow", 'def attack():\n    return open("/etc/shadow").read()', leak="root:"),
    Attempt(
        "read-etc-shadow-via-proc-root",
        'def attack():\n    return open("/proc/1/root/etc/shadow").read()',
        leak="root:",
    ),
    Attempt(
        "read-etc-shadow-via-workspace-symlink",
        'import os\ndef attack():\n    os.symlink("/etc/shadow", "shadow-$token")\n    return open("shadow-$token").read()',
        leak="root:",
    ),
    Attempt(
        "read-ssh-key-via-workspace-symlink",
        "import os\n"
        "def attack():\n"
        '    os.symlink("$home/.ssh/id_rsa", "key-$token")\n'
        '    return open("key-$token").read()',
        leak="$secret",
        control=True,
    ),
    Attempt(
        "hardlink-ssh-key-into-workspace",
        "import os\n"
        "def attack():\n"
        '    os.link("$home/.ssh/id_rsa", "hardlink-$token")\n'
        '    return open("hardlink-$token").read()',
        leak="$secret",
    ),
    Attempt(
        "read-other-users-home",
        'import os\ndef attack():\n    return os.listdir("$other_home")',
        leak="$other_marker",
        control=True,
    ),
    # --- other processes ------------------------------------------------------------------------
    Attempt(
        "read-host-process-environ",
        'def attack():\n    return open("/proc/$victim_pid/environ", "rb").read()',
        leak="$secret",
        control=True,
        needs_victim=True,
    ),
    Attempt(
        "see-host-process",
        'def attack():\n    return open("/proc/$host_pid/cmdline", "rb").read()',
        leak="$host_command",
        control=True,
    ),
    Attempt(
        "read-host-pid1",
        'def attack():\n    return open("/proc/1/cmdline", "rb").read()',
        leak="$host_init",
        control=True,
    ),
    Attempt(
        "kill-host-process",
        "import os, signal\ndef attack():\n    os.kill($victim_pid, signal.SIGKILL)",
        control=True,
        needs_victim=True,
    ),
    Attempt(
        "ptrace-host-process",
        CTYPES_LIBC + "def attack():\n"
        "    check(libc.ptrace(16, $victim_pid, None, None))  # PTRACE_ATTACH\n"
        "    libc.ptrace(17, $victim_pid, None, None)  # PTRACE_DETACH\n"
        '    return "attached"',
        control=True,
        needs_victim=True,
    ),
    Attempt(
        "host-sysv-shared-memory",
        CTYPES_LIBC + "def attack():\n    return check(libc.shmget($shm_key, 0, 0))",
        control=True,
    ),
    Attempt(
        "host-user-keyring",
        CTYPES_LIBC + "import platform\n"
        "def attack():\n"
        '    add_key, keyctl = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]\n'
        '    key = check(libc.syscall(keyctl, 10, -4, b"user", b"$key_name", 0))  # KEYCTL_SEARCH @u\n'
        "    buf = ctypes.create_string_buffer(200)\n"
        "    check(libc.syscall(keyctl, 11, key, buf, 200))  # KEYCTL_READ\n"
        "    return buf.value",
        leak="$secret",
        control=True,
    ),
    # --- network --------------------------------------------------------------------------------
    Attempt(
        "tcp-to-host-loopback-server",
        'import socket\ndef attack():\n    return socket.create_connection(("127.0.0.1", $tcp_port), timeout=3).recv(64)',
        leak="reached",
        control=True,
    ),
    Attempt(
        "tcp-to-host-address",
        "import socket\n"
        "def attack():\n"
        '    return socket.create_connection(("$host_ip", $tcp_any_port), timeout=3).recv(64)',
        leak="reached",
        control=True,
    ),
    Attempt(
        "dns-resolve-external-name",
        'import socket\ndef attack():\n    return socket.getaddrinfo("pypi.org", 443)',
    ),
    Attempt(
        "tcp-to-external-address",
        'import socket\ndef attack():\n    return socket.create_connection(("1.1.1.1", 443), timeout=3)',
    ),
    Attempt(
        "udp-to-external-address",
        "import socket\n"
        "def attack():\n"
        '    return socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("8.8.8.8", 53))',
    ),
    Attempt(
        "raw-socket",
        "import socket\ndef attack():\n    return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)",
    ),
    Attempt(
        "packet-socket",
        "import socket\ndef attack():\n    return socket.socket(socket.AF_PACKET, socket.SOCK_RAW)",
    ),
    Attempt(
        "host-unix-socket-outside-runtime-dir",
        "import socket\n"
        "def attack():\n"
        "    s = socket.socket(socket.AF_UNIX); s.settimeout(3)\n"
        '    s.connect("$host_socket")\n'
        "    return s.recv(64)",
        leak="reached",
        control=True,
    ),
    Attempt(
        "host-abstract-unix-socket",
        "import socket\n"
        "def attack():\n"
        "    s = socket.socket(socket.AF_UNIX); s.settimeout(3)\n"
        '    s.connect("\\0$abstract_name")\n'
        "    return s.recv(64)",
        leak="reached",
        control=True,
    ),
    Attempt(
        "host-run-directory-sockets",
        'import os\ndef attack():\n    return os.listdir("/run")',
    ),
    # --- privileges and kernel interfaces -------------------------------------------------------
    Attempt(
        "capabilities",
        "def attack():\n"
        '    caps = {l.split(":")[0]: int(l.split()[1], 16) for l in open("/proc/self/status") if l.startswith("Cap")}\n'
        '    if not any(caps[k] for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")):\n'
        '        raise PermissionError(f"no capabilities: {caps}")\n'
        "    return caps",
    ),
    Attempt(
        "setuid-binaries-can-raise-privileges",
        "def attack():\n"
        '    status = dict(l.split(":", 1) for l in open("/proc/self/status"))\n'
        '    if status["NoNewPrivs"].strip() == "1":\n'
        '        raise PermissionError("no_new_privs is set: setuid bits and file capabilities are ignored")\n'
        '    return "exec of a setuid binary would raise privileges"',
    ),
    Attempt(
        "remount-root-read-write",
        "import subprocess\n"
        "def attack():\n"
        '    done = subprocess.run(["mount", "-o", "remount,rw", "/"], capture_output=True, text=True)\n'
        "    if done.returncode:\n"
        "        raise PermissionError(done.stderr.strip())\n"
        '    _write("/etc/ipybox-remount-$token", "x")',
        host_absent="/etc/ipybox-remount-$token",
    ),
    Attempt(
        "mount-syscall",
        CTYPES_LIBC + 'def attack():\n    check(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))',
    ),
    Attempt("unshare-user-namespace", SINGLE_THREADED.replace("FLAG", "0x10000000")),  # CLONE_NEWUSER
    Attempt("unshare-mount-namespace", SINGLE_THREADED.replace("FLAG", "0x00020000")),  # CLONE_NEWNS
    Attempt(
        "unshare-command-root-in-new-userns",
        "import subprocess\n"
        "def attack():\n"
        '    done = subprocess.run(["unshare", "-Urm", "id"], capture_output=True, text=True)\n'
        "    if done.returncode:\n"
        "        raise PermissionError(done.stderr.strip())\n"
        "    return done.stdout",
    ),
    Attempt("chroot", 'import os\ndef attack():\n    os.chroot("/tmp")'),
    Attempt(
        "write-proc-sys-core-pattern",
        "def attack():\n"
        '    value = open("/proc/sys/kernel/core_pattern").read()\n'
        '    _write("/proc/sys/kernel/core_pattern", value)',
    ),
    Attempt(
        "write-proc-sys-vm-swappiness",
        "def attack():\n"
        '    value = open("/proc/sys/vm/swappiness").read()\n'
        '    _write("/proc/sys/vm/swappiness", value)',
    ),
    Attempt("write-sysrq-trigger", 'def attack():\n    _write("/proc/sysrq-trigger", "h")'),
    Attempt(
        "leave-sandbox-cgroup",
        'import os\ndef attack():\n    _write("/sys/fs/cgroup/pids/cgroup.procs", str(os.getpid()))',
    ),
    Attempt(
        "raise-resource-limit",
        "import resource\n"
        "def attack():\n"
        "    resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))",
    ),
    Attempt(
        "set-system-clock",
        "import time\ndef attack():\n    time.clock_settime(time.CLOCK_REALTIME, time.time())",
    ),
    Attempt("set-hostname", 'import socket\ndef attack():\n    socket.sethostname("pwned-$token")'),
    # --- resource exhaustion (the shared kernel must survive) -----------------------------------
    Attempt(
        "fork-bomb",
        "import os, time\n"
        "def attack():\n"
        "    parent, end, children, refused = os.getpid(), time.time() + 3, 0, 0\n"
        "    while time.time() < end:\n"
        "        try:\n"
        "            if os.fork() == 0:\n"
        "                continue  # children bomb too\n"
        "            children += 1\n"
        "        except OSError:\n"
        "            refused += 1\n"
        "            time.sleep(0.02)\n"
        "    if os.getpid() != parent:\n"
        "        os._exit(0)\n"
        "    while True:\n"
        "        try:\n"
        "            os.wait()\n"
        "        except ChildProcessError:\n"
        "            break\n"
        "    if refused:\n"
        '        raise BlockingIOError(f"fork refused {refused} times after {children} children")\n'
        '    return f"{children} children, never refused"',
        fills=True,
    ),
    Attempt(
        "allocate-past-memory-limit",
        "def attack():\n    return len(bytearray(3 * 1024**3))",
        fills=True,
    ),
    Attempt(
        "fill-disk-through-workspace-file",
        "def attack():\n"
        '    with open("big-$token", "wb") as f:\n'
        "        for _ in range(64):\n"
        "            f.write(b'x' * 2**20)\n"
        '    return "64 MiB written"',
        fills=True,
    ),
    Attempt(
        "fill-private-tmp",
        "import os\n"
        "def attack():\n"
        "    for i in range(64):\n"
        '        with open(f"/tmp/fill-{i}", "wb") as f:\n'
        "            f.write(b'x' * 4 * 2**20)\n"
        '    return "256 MiB written"',
        fills=True,
    ),
    Attempt(
        "fill-dev-shm",
        "def attack():\n"
        "    for i in range(64):\n"
        '        with open(f"/dev/shm/fill-{i}", "wb") as f:\n'
        "            f.write(b'x' * 4 * 2**20)\n"
        '    return "256 MiB written"',
        fills=True,
    ),
]
