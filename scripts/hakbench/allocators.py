# SPDX-License-Identifier: MIT
"""The contenders, and the Debian packages the comparison needs.

Every allocator runs the same benchmark binary: hakmem and the peers through
LD_PRELOAD, glibc with nothing preloaded.  Besides the built-in ones, any
allocator built as a shared object can run, under a name of the user's
(--allocators NAME=PATH)."""

import datetime
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass

from . import elf

ORDER = ("hakmem", "mimalloc", "tcmalloc", "jemalloc", "glibc")
BASELINE = "mimalloc"  # ratios are to its median

# name -> (Debian package, shared object it installs)
PEERS = {
    "mimalloc": ("libmimalloc2.0", "libmimalloc.so.2"),
    "tcmalloc": ("libtcmalloc-minimal4", "libtcmalloc_minimal.so.4"),
    "jemalloc": ("libjemalloc2", "libjemalloc.so.2"),
}

# hakmem-PROFILE, also built in: hakmem under HAKMEM_PROFILE=PROFILE (hakmem
# alone runs the default, speed), so that one matrix shows what each profile
# costs and saves beside the peers.
PROFILES = ("speed", "balanced", "lean")


# NAME-prof, also built in: the allocator with its sampled heap profiler on,
# one sample per 512 KiB on average (jemalloc's Debian build has prof).
PROF = {"hakmem": (("HAKMEM_PROF_SAMPLE", "524288"),),
        "jemalloc": (("MALLOC_CONF", "prof:true,lg_prof_sample:19"),)}


def profile_of(name):
    """PROFILE for hakmem-PROFILE (prof: the heap profiler on), else None."""
    base, sep, profile = name.partition("-")
    return profile if base == "hakmem" and sep and (profile in PROFILES or profile == "prof") else None


def is_hakmem(name):
    """hakmem or one of its profiles: not a peer."""
    return name == "hakmem" or profile_of(name) is not None


def is_peer(name):
    """An allocator hakmem is compared with: neither hakmem nor NAME-prof (a
    profiler's cost, shown beside its allocator)."""
    return not is_hakmem(name) and not name.endswith("-prof")


def hakmem(preload, profile=None):
    """hakmem (the library at preload), or hakmem-PROFILE: under that profile."""
    if profile is None:
        return Allocator("hakmem", preload)
    settings = PROF["hakmem"] if profile == "prof" else (("HAKMEM_PROFILE", profile),)
    return Allocator(f"hakmem-{profile}", preload, settings=settings)


# What every --allocators help says of hakmem's profiles.
PROFILES_HELP = (f"hakmem-PROFILE (hakmem under HAKMEM_PROFILE=PROFILE, {'|'.join(PROFILES)}: a contender of its own, "
                 "not a peer), hakmem-prof and jemalloc-prof (the heap profiler on, a sample per 512 KiB)")


# command -> (Debian package, what goes without it)
TOOLS = {
    "time": ("time", "peak RSS and page faults"),
    "gnuplot": ("gnuplot-nox", "charts"),
    "strace": ("strace", "syscall counts of the peers"),
    "valgrind": ("valgrind", "instruction counts"),
}


# Variables that tune an allocator: left out of the environment a run
# inherits, so that a stray HAKMEM_PROFILE or MIMALLOC_ARENA_EAGER_COMMIT in
# the shell cannot change one contender unseen (an allocator's own settings
# and a run's extra variables set them on purpose).
TUNING = re.compile(r"(?!HAKMEM_NO_APT$|HAKMEM_PEERS$|HAKMEM_TEST_)"
                    r"((HAKMEM|MIMALLOC|TCMALLOC|MALLOC|JE_MALLOC)_|GLIBC_TUNABLES$)")


def inherited_tuning():
    """The allocator-tuning variables of our environment, which runs leave out."""
    return sorted(k for k in os.environ if TUNING.match(k))


@dataclass(frozen=True)
class Allocator:
    name: str
    preload: str | None  # None: glibc's malloc, nothing preloaded
    settings: tuple = ()  # (variable, value) pairs of its own, e.g. a hakmem profile
    origin: str | None = None  # given by path: what the report says of its file

    def env(self, **extra):
        """The environment of a run: ours without the allocator-tuning
        variables, with this allocator preloaded and its settings and the
        extra variables set."""
        env = {k: v for k, v in os.environ.items() if not TUNING.match(k)}
        env.pop("LD_PRELOAD", None)
        if self.preload:
            env["LD_PRELOAD"] = self.preload
        env.update(self.settings)
        env.update(extra)
        return env


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")


def _describe_file(path, soname):
    st = os.stat(path)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    mtime = datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{path} (soname {soname or 'none'}, {st.st_size} bytes, modified {mtime}, sha256 {digest})"


def from_path(name, path):
    """The allocator in the shared object at path, to run under `name`.
    Raises ValueError, saying what is wrong, unless it is a 64-bit shared
    object that the dynamic loader preloads into a program."""
    if not NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a usable name (letters, digits and _ . + -)")
    if name in ORDER or profile_of(name):
        raise ValueError(f"{name} is the name of a built-in allocator; give this one another")
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"{name}: {path} does not exist")
    try:
        soname = elf.soname(path)
    except elf.NotSharedObject as e:
        raise ValueError(f"{name}: {path} is {e}") from None
    except OSError as e:
        raise ValueError(f"{name}: cannot read {path}: {e.strerror}") from None
    # The loader only warns when it cannot preload a library, and runs the
    # program without it: the library must be in the program's own maps.
    real = os.path.realpath(path)
    r = subprocess.run(["cat", "/proc/self/maps"], env=Allocator(name, path).env(), capture_output=True, text=True)
    if r.returncode != 0 or real not in r.stdout:
        why = r.stderr.strip() or (f"exit status {r.returncode}" if r.returncode else "not in the maps of a program")
        raise ValueError(f"{name}: {path} cannot be preloaded: {why}")
    return Allocator(name, path, origin=_describe_file(path, soname))


# Releases of a peer built from source, newer than Debian's (mimalloc 2.4.1
# and 3.4.3 beside Debian 12's 2.0.9), each in PEERS_DIR/NAME-VERSION/build/:
# run under NAME-VERSION by that name alone, as if given by path.
PEERS_DIR = os.environ.get("HAKMEM_PEERS", "/tmp/peers")
BUILT = {"mimalloc": "libmimalloc.so"}


def built_peers():
    """{name: path} of the peers built from source under PEERS_DIR, oldest
    version first: {"mimalloc-2.4.1": ".../mimalloc-2.4.1/build/libmimalloc.so", ...}."""
    found = {}
    for peer, lib in BUILT.items():
        for path in glob.glob(os.path.join(PEERS_DIR, f"{peer}-*", "build", lib)):
            found[os.path.basename(os.path.dirname(os.path.dirname(path)))] = path

    def version(name):
        return [int(x) if x.isdigit() else 0 for x in re.split(r"[.-]", name.partition("-")[2])]

    return dict(sorted(found.items(), key=lambda item: (item[0].partition("-")[0], version(item[0]))))


def parse(specs):
    """The --allocators list: names of built-in allocators, of peers built
    from source (built_peers) and NAME=PATH entries, in the order given.
    Returns a list of names (built-in) and Allocators (given by path or
    built from source); raises ValueError on a bad entry."""
    out, seen, built = [], set(), None
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep and name not in ORDER and not profile_of(name) and name != "jemalloc-prof":
            built = built_peers() if built is None else built
            if name not in built:
                raise ValueError(f"unknown allocator {name}; known: {', '.join(ORDER)}, "
                                 f"{', '.join('hakmem-' + p for p in PROFILES)}, "
                                 + "".join(f"{n}, " for n in built)
                                 + f"or NAME=PATH to a shared object (built peers are looked for in {PEERS_DIR})")
            sep, path = "=", built[name]
        if name in seen:
            raise ValueError(f"{name} is given twice")
        seen.add(name)
        out.append(from_path(name, path) if sep else name)
    return out


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
    """Installs Debian packages when running as root, unless HAKMEM_NO_APT=1;
    False if it could not."""
    if not packages:
        return True
    if os.geteuid() != 0 or not shutil.which("apt-get") or os.environ.get("HAKMEM_NO_APT") == "1":
        return False
    print(f"installing {' '.join(packages)}", file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    quiet = {"stdout": subprocess.DEVNULL, "env": env}
    return (
        subprocess.run(["apt-get", "update", "-q"], **quiet).returncode == 0
        and subprocess.run(["apt-get", "install", "-y", "-q", *packages], **quiet).returncode == 0
    )


def prepare(specs, hakmem_so, tools=(), packages=()):
    """The allocators of `specs` (from parse) that can run here, in the
    order given, after installing the missing peers and tools, and the
    Debian `packages` given (the programs to run, where missing), in one
    apt-get; says on stderr what it skips.  Returns (allocators, set of the
    tools available)."""
    if inherited_tuning():
        note(f"left out of every run's environment: {' '.join(inherited_tuning())} (allocator settings)")
    names = [s for s in specs if isinstance(s, str)]
    missing = [PEERS[n.removesuffix("-prof")][0] for n in names
               if n.removesuffix("-prof") in PEERS and not _find_library(*PEERS[n.removesuffix("-prof")])]
    missing += [TOOLS[t][0] for t in tools if not shutil.which(t)] + list(packages)
    if missing and not apt_install(missing):
        note(f"could not install {' '.join(missing)} (needs root and apt-get, and HAKMEM_NO_APT unset)")

    allocators = []
    for spec in specs:
        if isinstance(spec, Allocator):
            allocators.append(spec)
        elif spec == "glibc":
            allocators.append(Allocator(spec, None))
        elif is_hakmem(spec):
            if os.path.exists(hakmem_so):
                allocators.append(hakmem(os.path.abspath(hakmem_so), profile_of(spec)))
            else:
                note(f"skipping {spec}: {hakmem_so} does not exist (make lib)")
        else:
            peer = spec.removesuffix("-prof")
            path = _find_library(*PEERS[peer])
            if path:
                allocators.append(Allocator(spec, path, settings=PROF[peer] if peer != spec else ()))
            else:
                note(f"skipping {spec}: package {PEERS[spec][0]} is not installed")
    available = {t for t in tools if shutil.which(t)}
    for t in sorted(set(tools) - available):
        note(f"no {t}: going without {TOOLS[t][1]}")
    return allocators, available
