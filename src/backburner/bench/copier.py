"""The copy load: one large file copied over and over, each copy fsync'd and removed.

`python -m backburner.bench.copier SRC DST [--progress FILE]`: with a progress file it
appends the bytes copied (a line per 4 MiB chunk), which is how the bench measures the bulk
work's own speed. It stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import sys

CHUNK = 4 << 20


def copy_once(src: str, dst: str, progress: int | None) -> None:
    with open(src, "rb") as fin:
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            while chunk := fin.read(CHUNK):
                os.write(fd, chunk)
                if progress is not None:
                    os.write(progress, f"{len(chunk)}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
    os.unlink(dst)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="backburner.bench.copier")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--progress")
    args = p.parse_args(argv)
    progress = (os.open(args.progress, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
                if args.progress else None)
    while True:
        copy_once(args.src, args.dst, progress)


if __name__ == "__main__":
    sys.exit(main())
