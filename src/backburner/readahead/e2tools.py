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


def complaint(text: str, tool_name: str = "") -> str:
    """The line of a tool's output that says what went wrong: its last line that starts
    with the tool's name (``mke2fs: Ext2 file already exists ...``); else, where the
    tool printed its usage text after the complaint (indented lines: mke2fs's list of
    extended options), the first line; else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    named = [ln for ln in lines if tool_name and ln.startswith(f"{tool_name}: ")]
    if named:
        return named[-1]
    if any(ln[:1] in ("\t", " ") for ln in text.splitlines()):
        return lines[0]
    return lines[-1]


def must(res: spawn.ToolResult, what: str, ok: Sequence[int] = (0,), tool_name: str = ""
         ) -> None:
    """A failed tool as one line: `what` and the tool's own complaint (`complaint`)."""
    if res.status not in ok:
        why = complaint(res.stderr or res.stdout, tool_name or what.split()[0])
        raise SystemStateError(f"{what} failed: {why or 'timed out'}")


__all__ = ["BLOCK", "GROUP_BYTES", "complaint", "must", "tool"]
