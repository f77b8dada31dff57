"""Packs on disk: read whole (size-capped) and decoded, written atomically.

A pack is replaced by a new recording at every boot it is collected on, and read by a
replay that may start at the same moment: it is written to a fresh random name in the
same directory and renamed over the old one, so a reader sees the old pack or the new
one, never half of either.
"""

from __future__ import annotations

import os

from ..base.errors import DataError, IOFailure, NotFoundError
from ..files import infile
from .pack import Pack, decode, encode

MAX_PACK_BYTES = 256 << 20  # far beyond any real pack: a bigger file is not one
RECORD_AGAIN = ("record it again (the boot's pack: delete it, and the next boot records a "
                "new one)")


def load(path: str | os.PathLike[str]) -> Pack:
    name = os.fspath(path)
    data = infile.read(name, "pack", MAX_PACK_BYTES)
    try:
        return decode(data)
    except DataError as err:
        raise DataError(f"{name}: {err.message}", err.hint or RECORD_AGAIN) from None


def save(path: str | os.PathLike[str], pack: Pack) -> int:
    """Write atomically (random temporary name, fsync, rename); returns the size."""
    name = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(name)
    if not os.path.isdir(folder):
        raise NotFoundError(f"directory {folder} does not exist", "create it first")
    if os.path.isdir(name):
        raise IOFailure(f"{name} is a directory")
    data = encode(pack)
    from ..files import outfile  # here: a replay, which only loads, starts without tempfile

    # whole or not at all; private: a pack names the files its owner's programs read
    outfile.write_bytes(name, data, outfile.PRIVATE)
    return len(data)
