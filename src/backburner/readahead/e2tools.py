"""Running e2fsprogs' tools (mke2fs, debugfs, dumpe2fs, resize2fs, tune2fs, e2fsck) for
`layout build-ext4`: one line and a hint when a tool is missing or fails, and the block
geometry the images are made with."""

from __future__ import annotations

from collections.abc import Sequence

from .. import spawn
from ..base.errors import SystemStateError, UnavailableError

BLOCK = 4096
GROUP_BYTES = 32768 * BLOCK  # a block group of a 4 KiB-block ext4


def tool(argv: list[str], what: str, timeout: float = 600.0, errors: str = "strict"
          ) -> spawn.ToolResult:
    try:  # LC_ALL=C: byte order (STAGING_PREFIX), and dumpe2fs's words
        res = spawn.run_tool(argv, timeout, env={"LC_ALL": "C"}, errors=errors)
    except FileNotFoundError:
        raise UnavailableError(f"{argv[0]} is not installed", "apt-get install e2fsprogs"
                               ) from None
    return res


def must(res: spawn.ToolResult, what: str, ok: Sequence[int] = (0,)) -> None:
    if res.status not in ok:
        lines = [ln for ln in (res.stderr or res.stdout).splitlines() if ln.strip()]
        raise SystemStateError(f"{what} failed: {lines[-1] if lines else 'timed out'}")


__all__ = ["BLOCK", "GROUP_BYTES", "must", "tool"]
