"""Three differently shaped cold starts, each a tree to put on an image and the command
that starts it there (chrooted: everything the start reads comes from the image).

- ``opens``: a program that only opens and reads files: 300 of 3,000 small files of a
  data tree, in a seeded order (the shape `layout` was first built for);
- ``scans``: one that lists directories and stats what they hold: every entry of 12
  directories, 240 small files read, parts of three large ones;
- ``loader``: an engine the dynamic loader links against 24 shared libraries (found
  through a RUNPATH whose first directory holds none of them, with the loader's own
  lookups of ld.so.cache, ld.so.preload and glibc-hwcaps subdirectories that do not
  exist), six of them large (2.4 MB, of which it runs a tenth), asking for 18 names that
  do not exist, then reading 236 of a data tree of 1,300 files and parts of three large
  ones while it calls functions all over its libraries in a seeded order (their pages
  faulted in between the data's reads): the shape of a real program's start that
  `layout` alone once barely helped.

The programs are C, compiled here (gcc): the readers statically, the engine against
this machine's libc, which goes onto the image with its loader. `scale` shrinks every
count (the test suite uses a small one, the benchmark 1.0).

Used by benchmarks/readahead_shapes.py and tests/readahead/test_check_shapes.py.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SHAPES = ("opens", "scans", "loader")
LOADER = "/lib64/ld-linux-x86-64.so.2"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


@dataclass(frozen=True)
class Start:
    """A shape built into a tree: the command that starts it, relative to the image's
    mount point (``argv(mnt)``)."""

    name: str
    program: str  # its path inside the tree
    args: tuple[str, ...] = ()

    def argv(self, mnt: str) -> list[str]:
        return ["chroot", mnt, self.program, *self.args]


def _n(count: int, scale: float) -> int:
    return max(2, round(count * scale))


def _cc(out: Path, source: str, *flags: str) -> None:
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["gcc", "-O1", "-o", str(out), str(src), *flags], check=True,
                   capture_output=True)
    src.unlink()


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _data_tree(root: Path, dirs: int, files: int, rng: random.Random,
               big: int = 3) -> tuple[list[str], list[str]]:
    """`files` small files (2-40 KiB) in `dirs` directories, and `big` files of 4 MiB:
    their paths (from /), small ones first."""
    small = []
    for i in range(files):
        d = root / f"d{i % dirs:02d}"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{i * 7919 % 10007:05d}.dat"
        p.write_bytes(rng.randbytes(rng.randint(2, 40) * 1024))
        small.append(p)
    large = []
    for i in range(big):
        p = root / f"pack{i}.bin"
        p.write_bytes(rng.randbytes(4 << 20))
        large.append(p)
    return [str(p) for p in small], [str(p) for p in large]


_READ_HELPERS = r"""
#include <fcntl.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>
static char buf[1 << 16];
static long slurp(const char *p) {
    long n = 0, got;
    int fd = open(p, O_RDONLY);
    if (fd < 0) return 0;
    while ((got = read(fd, buf, sizeof buf)) > 0) n += got;
    close(fd);
    return n;
}
static long part(const char *p, long off, long len) {
    long n = 0, got;
    int fd = open(p, O_RDONLY);
    if (fd < 0) return 0;
    while (len > 0 && (got = pread(fd, buf, len < (long)sizeof buf ? len : (long)sizeof buf,
                                   off)) > 0) { n += got; off += got; len -= got; }
    close(fd);
    return n;
}
static long scan(const char *d) {
    long n = 0;
    DIR *dir = opendir(d);
    struct dirent *e;
    struct stat st;
    if (!dir) return 0;
    while ((e = readdir(dir))) if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        n += st.st_size;
    closedir(dir);
    return n;
}
"""


def _strings(name: str, items: list[str]) -> str:
    return (f"static const char *{name}[] = {{" + ",".join(_c_string(s) for s in items)
            + "};\n")


def _parts(large: list[str], rng: random.Random) -> list[tuple[str, int, int]]:
    """Three ranges of each large file (64-256 KiB each)."""
    out = []
    for p in large:
        for _ in range(3):
            out.append((p, rng.randrange(0, 60) << 16, rng.randint(1, 4) << 16))
    return out


def _parts_c(parts: list[tuple[str, int, int]]) -> str:
    return (_strings("part_path", [p for p, _, _ in parts])
            + "static const long part_at[][2] = {"
            + ",".join(f"{{{o},{n}}}" for _, o, n in parts) + "};\n")


def opens(root: Path, scale: float = 1.0, seed: int = 1) -> Start:
    """``opens``: /bin/reader reads the files of /data.list in its order."""
    rng = random.Random(seed)
    small, _ = _data_tree(root / "data", _n(30, scale), _n(3000, scale), rng, big=0)
    chosen = [p[len(str(root)):] for p in rng.sample(small, _n(300, scale))]
    (root / "bin").mkdir(parents=True, exist_ok=True)
    _cc(root / "bin/reader", _READ_HELPERS + _strings("names", chosen) + r"""
int main(void) {
    long n = 0;
    for (unsigned i = 0; i < sizeof names / sizeof *names; i++) n += slurp(names[i]);
    return n > 0 ? 0 : 1;
}
""", "-static")
    return Start("opens", "/bin/reader")


def scans(root: Path, scale: float = 1.0, seed: int = 2) -> Start:
    """``scans``: /bin/scanner lists and stats 12 directories, reads 240 files and parts
    of three large ones."""
    rng = random.Random(seed)
    small, large = _data_tree(root / "data", _n(40, scale), _n(3000, scale), rng)
    dirs = sorted({os.path.dirname(p) for p in small})
    listed = [d[len(str(root)):] for d in rng.sample(dirs, min(len(dirs), _n(12, scale)))]
    chosen = [p[len(str(root)):] for p in rng.sample(small, _n(240, scale))]
    parts = [(p[len(str(root)):], o, n) for p, o, n in _parts(large, rng)]
    (root / "bin").mkdir(parents=True, exist_ok=True)
    _cc(root / "bin/scanner", _READ_HELPERS + _strings("dirs", listed)
        + _strings("names", chosen) + _parts_c(parts) + r"""
int main(void) {
    long n = 0;
    unsigned i;
    for (i = 0; i < sizeof dirs / sizeof *dirs; i++) n += scan(dirs[i]);
    for (i = 0; i < sizeof names / sizeof *names; i++) n += slurp(names[i]);
    for (i = 0; i < sizeof part_path / sizeof *part_path; i++)
        n += part(part_path[i], part_at[i][0], part_at[i][1]);
    return n > 0 ? 0 : 1;
}
""", "-static")
    return Start("scans", "/bin/scanner")


def _library(lib: int, functions: int, rng: random.Random) -> str:
    """A shared library of `functions` functions of about 1 KiB of code each, and a
    64 KiB table some of them read."""
    lines = [f"static const unsigned table{lib}[16384] = {{"
             + ",".join(str(rng.randrange(1 << 30)) for _ in range(64)) + "};"]
    for f in range(functions):
        body = "".join(f"    x = x * {rng.randrange(3, 1 << 16)} + {rng.randrange(1 << 20)};"
                       f" x ^= x >> {rng.randrange(1, 13)};\n" for _ in range(28))
        uses = f"    x += table{lib}[(x & 16383)];\n" if f % 3 == 0 else ""
        lines.append(f"int lib{lib:02d}_f{f:03d}(int x) {{\n{body}{uses}    return x;\n}}")
    return "\n".join(lines) + "\n"


def loader(root: Path, scale: float = 1.0, seed: int = 3) -> Start:
    """``loader``: /usr/bin/engine, linked against 24 libraries in /usr/lib/engine
    (RUNPATH /usr/lib/engine/extra, which holds none of them, then /usr/lib/engine),
    calling a third of their functions in a seeded order, then reading its data and
    asking for names that do not exist."""
    rng = random.Random(seed)
    libs, functions, large = _n(24, scale), _n(200, scale), _n(6, scale)
    libdir = root / "usr/lib/engine"
    (libdir / "extra").mkdir(parents=True)
    for i in range(_n(40, scale)):  # what the first RUNPATH directory holds instead
        (libdir / "extra" / f"plugin{i:02d}.conf").write_bytes(rng.randbytes(3000))
    build = root.parent / f".{root.name}-build"
    build.mkdir()
    try:
        counts = [functions * 10 if lib < large else functions for lib in range(libs)]
        for lib in range(libs):
            _cc(build / f"libe{lib:02d}.so", _library(lib, counts[lib], rng), "-shared",
                "-fPIC")
            shutil.copy2(build / f"libe{lib:02d}.so", libdir / f"libe{lib:02d}.so")
        names = [f"lib{lib:02d}_f{f:03d}" for lib in range(libs) for f in range(counts[lib])]
        called = [n for lib in range(libs)
                  for n in rng.sample(names[sum(counts[:lib]):sum(counts[:lib + 1])],
                                      counts[lib] // (30 if lib < large else 3))]
        rng.shuffle(called)
        small, large = _data_tree(root / "usr/share/engine", _n(25, scale),
                                  _n(1300, scale), rng)
        chosen = [p[len(str(root)):] for p in rng.sample(small, _n(236, scale))]
        parts = [(p[len(str(root)):], o, n) for p, o, n in _parts(large, rng)]
        dirs = sorted({os.path.dirname(p)[len(str(root)):] for p in small})
        missing = ["/etc/engine/engine.conf", "/etc/engine/local.conf",
                   "/usr/share/engine/fonts.cache"]
        missing += [f"{rng.choice(dirs)}/override{i:02d}.dat" for i in range(15)]
        missing = missing[:_n(18, scale)]
        source = (_READ_HELPERS + "".join(f"int {n}(int);\n" for n in names)
                  + "typedef int (*fn)(int);\nstatic fn table[] = {"
                  + ",".join(names) + "};\n"
                  + "static const unsigned short order[] = {"
                  + ",".join(str(names.index(n)) for n in called) + "};\n"
                  + _strings("names", chosen) + _parts_c(parts) + _strings("missing", missing)
                  + r"""
#define N(a) (sizeof a / sizeof *a)
int main(void) {
    int x = 1;
    long n = 0;
    unsigned i, c = 0, files = N(names) + N(part_path);
    struct stat st;
    for (i = 0; i < N(missing); i++)
        n += stat(missing[i], &st) == 0 ? 1 : 0;
    for (i = 0; i < files; i++) {  /* the calls spread over the data's reads */
        unsigned until = (unsigned)((unsigned long)N(order) * (i + 1) / files);
        for (; c < until; c++) x = table[order[c]](x);
        n += i < N(names) ? slurp(names[i]) : part(part_path[i - N(names)],
                                                   part_at[i - N(names)][0],
                                                   part_at[i - N(names)][1]);
    }
    return (n > 0 || x == 42) ? 0 : 1;
}
""")
        (root / "usr/bin").mkdir(parents=True)
        _cc(root / "usr/bin/engine", source, f"-L{build}",
            *[f"-le{lib:02d}" for lib in range(libs)],
            "-Wl,--enable-new-dtags,-rpath,/usr/lib/engine/extra:/usr/lib/engine")
    finally:
        shutil.rmtree(build)
    for path in (LOADER, LIBC):
        dst = root / path.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(path), dst)
    (root / "etc").mkdir(exist_ok=True)  # no ld.so.cache, no ld.so.preload: looked for
    return Start("loader", "/usr/bin/engine")


BUILDERS: dict[str, Callable[..., Start]] = {"opens": opens, "scans": scans, "loader": loader}


def build(shape: str, root: Path, scale: float = 1.0) -> Start:
    """The tree of `shape` under `root` (made), and its start."""
    root.mkdir(parents=True, exist_ok=True)
    return BUILDERS[shape](root, scale)


__all__ = ["BUILDERS", "SHAPES", "Start", "build"]
