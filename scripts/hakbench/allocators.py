# SPDX-License-Identifier: MIT
"""The contenders, and the Debian packages the comparison needs.

Every allocator runs the same benchmark binary: hakmem and the peers through
LD_PRELOAD, glibc with nothing preloaded."""

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass

ORDER = ("hakmem", "mimalloc", "tcmalloc", "jemalloc", "glibc")
BASELINE = "mimalloc"  # ratios are to its median

# name -> (Debian package, shared object it installs)
PEERS = {
    "mimalloc": ("libmimalloc2.0", "libmimalloc.so.2"),
    "tcmalloc": ("libtcmalloc-minimal4", "libtcmalloc_minimal.so.4"),
    "jemalloc": ("libjemalloc2", "libjemalloc.so.2"),
}

# command -> (Debian package, what goes without it)
TOOLS = {
    "time": ("time", "peak RSS and page faults"),
    "gnuplot": ("gnuplot-nox", "charts"),
    "strace": ("strace", "syscall counts of the peers"),
    "valgrind": ("valgrind", "instruction counts"),
}


@dataclass(frozen=True)
class Allocator:
    name: str
    preload: str | None  # None: glibc's malloc, nothing preloaded

    def env(self, **extra):
        """The environment of a run: ours, with this allocator preloaded and
        the extra variables set."""
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        if self.preload:
            env["LD_PRELOAD"] = self.preload
        env.update(extra)
        return env


def note(msg):
    print(f"note: {msg}", file=sys.stderr)


def _dpkg(*args):
    """dpkg's answer, or "" where it fails or there is no dpkg."""
    if not shutil.which(args[0]):
        return ""
    r = subprocess.run(args, capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def package_version(package):
    return _dpkg("dpkg-query", "-W", "-f=${Version}", package).strip() or None


def _find_library(package, soname):
    for path in _dpkg("dpkg", "-L", package).splitlines():
        if path.endswith("/" + soname) and os.path.exists(path):
            return path
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for d in (f"/usr/lib/{multiarch}", "/usr/lib64", "/usr/lib"):
        path = os.path.join(d, soname)
        if os.path.exists(path):
            return path
    return None


def apt_install(packages):
    """Installs Debian packages when running as root; False if it could not."""
    if not packages:
        return True
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    print(f"installing {' '.join(packages)}", file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    quiet = {"stdout": subprocess.DEVNULL, "env": env}
    return (
        subprocess.run(["apt-get", "update", "-q"], **quiet).returncode == 0
        and subprocess.run(["apt-get", "install", "-y", "-q", *packages], **quiet).returncode == 0
    )


def prepare(names, hakmem_so, tools=()):
    """The allocators among `names` that can run here, in ORDER, after
    installing the missing peers and tools in one apt-get; says on stderr
    what it skips.  Returns (allocators, set of the tools available)."""
    missing = [PEERS[n][0] for n in names if n in PEERS and not _find_library(*PEERS[n])]
    missing += [TOOLS[t][0] for t in tools if not shutil.which(t)]
    if missing and not apt_install(missing):
        note(f"could not install {' '.join(missing)} (needs root and apt-get)")

    allocators = []
    for name in ORDER:
        if name not in names:
            continue
        if name == "glibc":
            allocators.append(Allocator(name, None))
        elif name == "hakmem":
            if os.path.exists(hakmem_so):
                allocators.append(Allocator(name, os.path.abspath(hakmem_so)))
            else:
                note(f"skipping hakmem: {hakmem_so} does not exist (make lib)")
        else:
            path = _find_library(*PEERS[name])
            if path:
                allocators.append(Allocator(name, path))
            else:
                note(f"skipping {name}: package {PEERS[name][0]} is not installed")
    available = {t for t in tools if shutil.which(t)}
    for t in sorted(set(tools) - available):
        note(f"no {t}: going without {TOOLS[t][1]}")
    return allocators, available
