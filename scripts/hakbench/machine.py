# SPDX-License-Identifier: MIT
"""What a report records about where and on what it ran."""

import os
import platform
import subprocess

from . import allocators


def git(*args, cwd=None):
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def commit(root):
    """The commit of the work tree, '+dirty' when it has changes."""
    head = git("rev-parse", "--short=12", "HEAD", cwd=root) or "no commit"
    dirty = git("status", "--porcelain", "--untracked-files=no", cwd=root)
    return head + ("+dirty" if dirty else "")


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _compiler():
    r = subprocess.run([os.environ.get("CC", "cc"), "--version"], capture_output=True, text=True)
    return r.stdout.splitlines()[0] if r.returncode == 0 and r.stdout else "unknown"


def _cpu_distance(root):
    """A cache line's round trip between CPUs 0 and 1 (build/bench/cpu_pingpong),
    or None: a virtual machine's two CPUs are near one hour and far the next."""
    probe = os.path.join(root, "build", "bench", "cpu_pingpong")
    if (os.cpu_count() or 1) < 2 or not os.access(probe, os.X_OK):
        return None
    try:
        r = subprocess.run([probe], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return f"a cache line's round trip between CPUs 0 and 1: {r.stdout.strip()} ns (bench/cpu_pingpong.c)" \
        if r.returncode == 0 and r.stdout.strip() else None


def describe(root, allocs=(), head=None, packages=()):
    """(label, value) pairs, in the order a report lists them: the machine,
    the peers' packages, hakmem's commit (`head` if given: taken before a
    report rewrites files of the work tree), the file of each allocator
    of `allocs` given by path, and the version of each Debian package of
    `packages` (the programs a report ran)."""
    info = [
        ("CPU", _cpu_model()),
        ("cores", str(os.cpu_count())),
        ("CPU to CPU", _cpu_distance(root) or "not measured"),
        ("kernel", f"{platform.system()} {platform.release()} {platform.machine()}"),
        ("glibc", os.confstr("CS_GNU_LIBC_VERSION") or "unknown"),
        ("compiler", _compiler()),
    ]
    for name, (package, _) in allocators.PEERS.items():
        info.append((name, f"{package} {allocators.package_version(package) or 'not installed'}"))
    info.append(("hakmem commit", head or commit(root)))
    info += [(a.name, a.origin) for a in allocs if a.origin]
    info += [(package, allocators.package_version(package) or "not installed") for package in packages]
    return info
