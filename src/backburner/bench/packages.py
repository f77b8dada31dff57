"""The packages the package-manager loads install: a generated app of the size and shape of a
real desktop app, built with Debian's own tools once, into a cache keyed by its content.

A real install is not thousands of equal small files: a desktop app is mostly small files
(icons, translations, scripts, data) and a few large shared objects that hold half of its
bytes. `layout` draws such a tree from a fixed seed (the same shape, the same bytes), half of
every file random and half zeros, so it compresses about 2:1 as binaries do. `deb` packs it
with dpkg-deb (xz, md5sums, root-owned, as Debian ships it); `flatpak` puts it in an app
beside a small generated runtime, exports both to a local OSTree repository (`flatpak
build-export`) and bundles each (`flatpak build-bundle`): what the flatpak loads install.

Built once per shape: under the root-owned state directory (every component checked by
safepath), at a name made of a hash of what determines the bytes (this generator's version,
the kind, the shape, the seed). A build runs in a journaled private scratch directory
(`system.PrivateDir`, removed when the build ends, or by `restore` after a SIGKILL) and is
renamed into the cache only once complete: nothing half-made is ever taken from it. A build
that fails ends the bench before any trial, with the tool's last lines of stderr.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import spawn, system
from ..base.errors import SystemStateError, UsageError
from ..base.quantities import human_size, parse_size
from ..files import logtail, safepath

#: Changes whenever the bytes or the packaging `layout`, `deb` or `flatpak` make change: a
#: cached build of an older generator is then never taken.
GENERATOR = 1
SEED = 1
DEFAULT_FILES = 3000
DEFAULT_SIZE = "96m"
MIN_FILES, MAX_FILES = 10, 100_000
MAX_SIZE = 8 << 30
#: One large shared object per this many files; together they hold LARGE_SHARE of the bytes.
FILES_PER_LARGE = 750
LARGE_SHARE = 0.5

DEB_PACKAGE = "backburner-bench-app"
APP_ID = "org.backburner.BenchApp"
RUNTIME_ID = "org.backburner.BenchPlatform"
RUNTIME_BRANCH = "1"
APP_BRANCH = "stable"
FLATPAK_ARCH = "x86_64"


@dataclass(frozen=True)
class Shape:
    """How many files and how many bytes the generated app has."""

    files: int = DEFAULT_FILES
    size: int = parse_size(DEFAULT_SIZE)

    @classmethod
    def parse(cls, load: str, files: str | None, size: str | None) -> Shape:
        """`FILES:SIZE` of a load spec (both or neither), checked."""
        if files is None:
            return cls()
        count = int(files)
        if not MIN_FILES <= count <= MAX_FILES:
            raise UsageError(f"load {load!r}: {count} files out of range",
                             f"use {MIN_FILES}..{MAX_FILES}")
        try:
            nbytes = parse_size(size or "", what="package size")
        except UsageError as err:
            raise UsageError(f"load {load!r}: {err.message}", "e.g. 3000:96m") from None
        if not count * 1024 <= nbytes <= MAX_SIZE:
            raise UsageError(f"load {load!r}: {human_size(nbytes)} for {count} files is out "
                             "of range", f"give at least 1 KiB a file and at most "
                             f"{human_size(MAX_SIZE)}")
        return cls(count, nbytes)

    @property
    def large(self) -> int:
        return max(1, self.files // FILES_PER_LARGE)

    def label(self) -> str:
        return f"{self.files} files, {human_size(self.size)}"


def files_of(shape: Shape, seed: int = SEED) -> list[tuple[str, int]]:
    """(relative path, size) of every file of the app, large shared objects first."""
    rng = random.Random(seed)
    large_bytes = int(shape.size * LARGE_SHARE)
    small = shape.files - shape.large
    out = []
    base, left = divmod(large_bytes, shape.large)
    for i in range(shape.large):
        out.append((f"lib/bench-app/libbench{i}.so.1", base + (1 if i < left else 0)))
    drawn = [rng.lognormvariate(8.3, 1.2) for _ in range(small)]  # median ~4 KiB
    scale = (shape.size - large_bytes) / sum(drawn)
    dirs = max(1, small // 50)
    kinds = ("png", "mo", "py", "json", "svg", "ui")
    for i, raw in enumerate(drawn):
        top = "share/bench-app" if i % 3 else "lib/bench-app/modules"
        out.append((f"{top}/d{i % dirs:03d}/f{i:05d}.{kinds[i % len(kinds)]}",
                    max(1, int(raw * scale))))
    return out


def total_bytes(shape: Shape) -> int:
    return sum(size for _, size in files_of(shape))


def layout(root: str, shape: Shape, seed: int = SEED) -> None:
    """Write the app's files under `root` (made by the caller)."""
    rng = random.Random(seed + 1)
    for rel, size in files_of(shape, seed):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        with open(safepath.create_new(path, 0o644), "wb") as f:
            half = size // 2
            f.write(rng.randbytes(half))
            f.write(bytes(size - half))


def cache_dir() -> Path:
    """Where finished builds are kept: root's state directory, nobody else's to plant."""
    return safepath.private_dir(system.state_dir() / "cache" / "packages", "package cache")


def _key(kind: str, shape: Shape) -> str:
    text = f"{GENERATOR}:{kind}:{shape.files}:{shape.size}:{SEED}"
    return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def cached(kind: str, shape: Shape) -> Path | None:
    """The finished build of this kind and shape, if there is one."""
    path = cache_dir() / _key(kind, shape)
    if not path.is_dir():
        return None
    safepath.check_chain(path, "package cache")
    return path


def build(kind: str, shape: Shape, env: Mapping[str, str] | None = None) -> Path:
    """The cached build of `kind` ("deb" or "flatpak") for `shape`, made now if missing."""
    found = cached(kind, shape)
    if found is not None:
        return found
    parent = cache_dir()
    with system.Transaction("bench-build") as tx:
        scratch = str(tx.apply(system.PrivateDir(str(parent), ".build-")))
        out = os.path.join(scratch, "out")
        os.mkdir(out, 0o755)
        home = os.path.join(scratch, "home")
        os.mkdir(home, 0o700)
        tools_env = {**(env or os.environ), **private_env(home, scratch)}
        if kind == "deb":
            _deb(scratch, out, shape, tools_env)
        else:
            _flatpak(scratch, out, shape, tools_env)
        final = parent / _key(kind, shape)
        try:
            os.rename(out, final)
        except OSError:  # another bench made it meanwhile: the same bytes
            if not final.is_dir():
                raise
    return final


def private_env(home: str, tmp: str) -> dict[str, str]:
    """HOME, the XDG directories and TMPDIR inside `home`/`tmp`: what the packaging tools
    would write for a user (flatpak's user installation, caches) stays in our directory."""
    return {"HOME": home, "XDG_DATA_HOME": os.path.join(home, "data"),
            "XDG_CACHE_HOME": os.path.join(home, "cache"),
            "XDG_CONFIG_HOME": os.path.join(home, "config"),
            "XDG_STATE_HOME": os.path.join(home, "state"),
            "FLATPAK_USER_DIR": os.path.join(home, "flatpak-user"), "TMPDIR": tmp}


def _control(shape: Shape) -> str:
    return (f"Package: {DEB_PACKAGE}\nVersion: {GENERATOR}.{shape.files}\nArchitecture: all\n"
            "Maintainer: backburner <bench@localhost>\n"
            f"Installed-Size: {total_bytes(shape) // 1024}\n"
            "Description: generated app for backburner bench's dpkg-loop load\n"
            f" {shape.label()}, the shape of a desktop app: no maintainer scripts.\n")


def _deb(scratch: str, out: str, shape: Shape, env: Mapping[str, str]) -> None:
    root = os.path.join(scratch, "deb")
    payload = os.path.join(root, "usr")
    os.makedirs(os.path.join(root, "DEBIAN"), 0o755)
    os.makedirs(payload, 0o755)
    layout(payload, shape)
    sums = []
    for rel, _ in files_of(shape):
        digest = hashlib.md5(Path(payload, rel).read_bytes(), usedforsecurity=False)
        sums.append(f"{digest.hexdigest()}  usr/{rel}\n")
    _write(os.path.join(root, "DEBIAN", "control"), _control(shape))
    _write(os.path.join(root, "DEBIAN", "md5sums"), "".join(sums))
    run_logged(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", root,
              os.path.join(out, "app.deb")], "building the .deb", scratch, env)


def _flatpak(scratch: str, out: str, shape: Shape, env: Mapping[str, str]) -> None:
    runtime = os.path.join(scratch, "runtime")
    os.makedirs(os.path.join(runtime, "files", "lib"), 0o755)
    _write(os.path.join(runtime, "metadata"),
           f"[Runtime]\nname={RUNTIME_ID}\nruntime={runtime_ref(True)}\n"
           f"sdk={runtime_ref(True)}\n")
    _write(os.path.join(runtime, "files", "lib", "os-release"), "ID=backburner-bench\n")
    app = os.path.join(scratch, "app")
    files = os.path.join(app, "files")
    os.makedirs(os.path.join(files, "bin"), 0o755)
    layout(files, shape)
    _write(os.path.join(app, "metadata"),
           f"[Application]\nname={APP_ID}\nruntime={runtime_ref(True)}\n"
           f"sdk={runtime_ref(True)}\ncommand=bench-app\n")
    _write(os.path.join(files, "bin", "bench-app"), "#!/bin/sh\n", 0o755)
    desktop = os.path.join(files, "share", "applications")
    os.makedirs(desktop, 0o755)
    _write(os.path.join(desktop, f"{APP_ID}.desktop"),
           "[Desktop Entry]\nType=Application\nName=bench app\nExec=bench-app\n")
    repo = os.path.join(out, "repo")
    steps = [
        (["flatpak", "build-finish", app, "--command=bench-app"], "flatpak build-finish"),
        (["flatpak", "build-export", "--runtime", "--files=files", "--no-update-summary",
          repo, runtime, RUNTIME_BRANCH], "exporting the runtime"),
        (["flatpak", "build-export", "--no-update-summary", repo, app, APP_BRANCH],
         "exporting the app"),
        (["flatpak", "build-bundle", "--runtime", repo, os.path.join(out, "runtime.flatpak"),
          RUNTIME_ID, RUNTIME_BRANCH], "bundling the runtime"),
        (["flatpak", "build-bundle", repo, os.path.join(out, "app.flatpak"), APP_ID,
          APP_BRANCH], "bundling the app"),
    ]
    for argv, what in steps:
        run_logged(argv, what, scratch, env)


def runtime_ref(short: bool = False) -> str:
    ref = f"{RUNTIME_ID}/{FLATPAK_ARCH}/{RUNTIME_BRANCH}"
    return ref if short else f"runtime/{ref}"


def app_ref() -> str:
    return f"app/{APP_ID}/{FLATPAK_ARCH}/{APP_BRANCH}"


TAIL_LINES, TAIL_CHARS = 5, 600


def run_logged(argv: list[str], what: str, workdir: str,
               env: Mapping[str, str] | None = None) -> None:
    """Run a packaging or package-manager tool to its end; SystemStateError with its last
    lines of output when it fails (its output kept in `workdir`/tool.log meanwhile)."""
    log = os.path.join(workdir, "tool.log")
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        out = spawn.run_helper(argv, cwd=workdir, stdout=fd, stderr=fd, env=env)
    finally:
        os.close(fd)
    if not out.ok:
        tail = logtail.last_lines(log, TAIL_LINES, TAIL_CHARS)
        said = " / ".join(_quiet(tail)) or "it said nothing"
        raise SystemStateError(f"{what} failed ({out.describe()}): {said}")


def _quiet(lines: list[str]) -> list[str]:
    return [re.sub(r"\s+", " ", ln).strip() for ln in lines]


def _write(path: str, text: str, mode: int = 0o644) -> None:
    with open(safepath.create_new(path, mode), "w") as f:
        f.write(text)


def copy_into(src: Path | str, directory: str) -> str:
    """A build's file copied onto the device under test (the loads read it from there, as a
    package manager reads what it downloaded to the same disk)."""
    dst = os.path.join(directory, os.path.basename(src))
    with open(src, "rb") as fin, open(safepath.create_new(dst, 0o644), "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return dst

