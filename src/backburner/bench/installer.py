"""The install-loop load: what a package or app update does to a disk.

`make` writes an archive of a few thousand small files (sizes drawn like a typical package
tree: mostly a few KiB, some larger). `run` unpacks it file by file with fsync on each file
and its directory (as dpkg does, so the data really reaches the disk), then deletes the
tree, and repeats (`--once` does one round: the shell-loop variant starts a new process for
every round, like one dpkg per package). With `--progress FILE` it appends a line per
installed file, which is how the bench measures the bulk work's own speed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tarfile

FILES = 3000
DIRS = 60


def make(archive: str, seed: int = 1) -> None:
    rng = random.Random(seed)
    tmp = archive + ".tmp"
    with tarfile.open(tmp, "w") as tar:
        for i in range(FILES):
            size = int(min(rng.lognormvariate(8.3, 1.2), 512 * 1024))  # median ~4 KiB
            info = tarfile.TarInfo(f"pkg/d{i % DIRS:02d}/f{i:05d}")
            info.size = size
            tar.addfile(info, _Bytes(rng.randbytes(size)))
    os.replace(tmp, archive)


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, n: int = -1) -> bytes:
        end = len(self.data) if n < 0 else self.pos + n
        out, self.pos = self.data[self.pos:end], min(end, len(self.data))
        return out


def one_round(archive: str, dest: str, progress: int | None = None) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    with tarfile.open(archive) as tar:
        for member in tar:
            path = os.path.join(dest, member.name)
            parent = os.path.dirname(path)
            os.makedirs(parent, exist_ok=True)
            src = tar.extractfile(member)
            if src is None:
                continue
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, src.read())
                os.fsync(fd)
            finally:
                os.close(fd)
            dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
            if progress is not None:
                os.write(progress, b"1\n")  # one file installed: the bulk work's unit
    shutil.rmtree(dest)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="backburner.bench.installer")
    p.add_argument("action", choices=["make", "run"])
    p.add_argument("--archive", required=True)
    p.add_argument("--dest")
    p.add_argument("--once", action="store_true")
    p.add_argument("--progress", help="append a line per installed file to this file")
    args = p.parse_args(argv)
    if args.action == "make":
        if not os.path.exists(args.archive):
            make(args.archive)
        return 0
    progress = (os.open(args.progress, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
                if args.progress else None)
    while True:
        one_round(args.archive, args.dest, progress)
        if args.once:
            return 0


if __name__ == "__main__":
    sys.exit(main())
