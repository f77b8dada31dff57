"""Where the probe's files lie on a testbed (`bench --probe-layout`, `--probe-root`).

On a fresh testbed the files a probe touches, copied one after another, are the best layout
there is; on a real root filesystem a program's files lie among thousands of others, and on
rotational media that spread *is* the start-up time. So:

* ``touched``: only the files the probe opened (and their interpreters, and the symlinks
  leading to them), contiguous — the fastest case, the quick preset's;
* ``directories``: every file of every directory that holds a touched file, copied in the
  order a package install writes them (sorted, directory by directory);
* ``aged``: the same, interleaved with filler files of package-like sizes, half of which are
  then deleted: the probe's files spread out over fragmented free space (seeded, recorded);
* ``--probe-root DIR``: a prepared tree copied as it is (an image is used by devices.py).

The layout's facts are recorded with the run: files, bytes, and how many physical runs the
probe's files occupy on the device (FIEMAP, through `backburner.extents`).
"""

from __future__ import annotations

import os
import random
import stat
from dataclasses import asdict, dataclass
from typing import Any

from .. import extents, spawn
from ..base.errors import SystemStateError
from . import probes

FILLER_MEDIAN_BYTES = 4096
#: Room a copied file takes beyond its bytes (its last block, its inode's share), and what
#: `aged` writes beside each (1-4 fillers, lognormal sizes whose mean is ~8 KiB, before half
#: are deleted): generous, as a bound before copying must be.
FILE_OVERHEAD_BYTES = 4096
AGED_FILLER_BYTES = 32 * 1024


@dataclass(frozen=True)
class LayoutFacts:
    mode: str
    files: int
    bytes: int
    physical_runs: int
    probe_files: int
    fillers: int = 0
    seed: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def bytes_needed(mode: str, touched: list[str]) -> int:
    """About what `build` writes for `mode` (at most, give or take ext4's own metadata)."""
    paths = touched if mode == "touched" else _directory_contents(touched)
    total = 0
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            total += st.st_size + FILE_OVERHEAD_BYTES
    return total + (len(paths) * AGED_FILLER_BYTES if mode == "aged" else 0)


def build(mode: str, touched: list[str], root: str, seed: int) -> int:
    """Put the probe's files under `root` as `mode` says; returns the files copied."""
    if mode == "touched":
        return probes.install(touched, root)
    paths = _directory_contents(touched)
    if mode == "directories":
        copied = sum(probes.mirror(p, root) for p in paths)
    else:
        copied = _aged(paths, root, random.Random(seed))
    return copied + probes.install(touched, root)  # interpreters, links, virtual roots


def copy_tree(source: str, root: str) -> None:
    """--probe-root DIR: the tree as it is (owners, modes, links, hard links, xattrs)."""
    res = spawn.run_tool(["cp", "-a", "--", os.path.join(source, "."), root], timeout=3600)
    if res.status != 0:
        lines = res.stderr.strip().splitlines()
        raise SystemStateError(f"copying {source} onto the testbed failed: "
                               f"{lines[-1] if lines else 'timed out'}")


def facts(mode: str, touched: list[str], root: str, seed: int | None) -> LayoutFacts:
    """What the probe's files look like on the device under test."""
    files = nbytes = 0
    for d, _, names in os.walk(root):
        if any(d.startswith(os.path.join(root, v.lstrip("/"))) for v in probes.VIRTUAL_ROOTS):
            continue
        for n in names:
            try:
                st = os.lstat(os.path.join(d, n))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                files += 1
                nbytes += st.st_size
    runs = probe_files = 0
    for path in touched:
        inside = os.path.join(root, path.lstrip("/"))
        if not os.path.isfile(inside) or os.path.islink(inside):
            continue
        try:
            runs += len(extents.layout_of(inside).runs)
        except Exception:  # noqa: BLE001 - a file FIEMAP cannot map (inline data) counts 0
            continue
        probe_files += 1
    return LayoutFacts(mode, files, nbytes, runs, probe_files, seed=seed)


def _directory_contents(touched: list[str]) -> list[str]:
    dirs = sorted({os.path.dirname(p) for p in touched if os.path.isfile(p)
                   and not probes.is_virtual(p)})
    out: list[str] = []
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        out += [os.path.join(d, n) for n in names if os.path.isfile(os.path.join(d, n))
                and not os.path.islink(os.path.join(d, n))]
    return out


def _aged(paths: list[str], root: str, rng: random.Random) -> int:
    """Each file written after a few filler files; half the fillers deleted afterwards, so
    the probe's files sit apart, among holes, as on a disk that has seen many updates."""
    filler_dir = os.path.join(root, "var", "lib", "backburner-filler")
    os.makedirs(filler_dir, exist_ok=True)
    fillers: list[str] = []
    copied = 0
    for path in paths:
        for _ in range(rng.randint(1, 4)):
            name = os.path.join(filler_dir, f"f{len(fillers):06d}")
            size = int(min(rng.lognormvariate(8.3, 1.2), 2 << 20))
            with open(name, "wb") as f:
                f.write(rng.randbytes(size))
            fillers.append(name)
        copied += probes.mirror(path, root)
    for name in rng.sample(fillers, len(fillers) // 2):
        os.unlink(name)
    return copied
