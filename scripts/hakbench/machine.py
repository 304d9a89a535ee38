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


def describe(root, allocs=(), head=None, packages=()):
    """(label, value) pairs, in the order a report lists them: the machine,
    the peers' packages, hakmem's commit (`head` if given: taken before a
    report rewrites files of the work tree), the file of each allocator
    of `allocs` given by path, and the version of each Debian package of
    `packages` (the programs a report ran)."""
    info = [
        ("CPU", _cpu_model()),
        ("cores", str(os.cpu_count())),
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
