"""The last lines of a helper's log or output file: what an error message or a stored trial
keeps of a probe, a load, a preparation step or a daemon, after the file itself is gone
with its private work directory."""

from __future__ import annotations


def last_lines(path: str, n: int = 1, max_chars: int = 600) -> list[str]:
    """Up to `n` last non-blank lines, each cut to its last `max_chars` characters; [] when
    the file is missing or unreadable. Only the file's end is read, however long it grew."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4 * n * max_chars))
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    lines = [ln for ln in text.splitlines() if ln.strip()][-n:]
    return [ln[-max_chars:] for ln in lines]
