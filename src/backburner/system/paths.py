"""Where backburner keeps its state, and who may change the machine.

The state directory holds the undo journals and the private work root; both are checked
(and created 0700) so that nobody but root can have planted anything in them.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..base.errors import NotRootError
from ..files import safepath

DEFAULT_STATE_DIR = "/var/lib/backburner"


def state_dir() -> Path:
    """Root's is /var/lib/backburner; another user's (who can only re-prioritise their own
    processes) is under their XDG state directory. BACKBURNER_STATE_DIR overrides both."""
    if "BACKBURNER_STATE_DIR" in os.environ:
        return Path(os.environ["BACKBURNER_STATE_DIR"])
    if os.geteuid() == 0:
        return Path(DEFAULT_STATE_DIR)
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                            ".local", "state")
    return Path(xdg, "backburner")


def journal_dir() -> Path:
    return state_dir() / "journal"


def work_root() -> Path:
    """Where testbeds and slowdisk daemons keep their files: inside the state directory,
    which only root can write (never a fixed name in a world-writable /var/tmp)."""
    return state_dir() / "work"


def trusted_dir(path: Path, what: str) -> Path:
    """`path`, created 0700 if missing, refused if anyone but us could have planted or can
    change any component of it (a journal entry may name any path to write as root)."""
    return safepath.private_dir(path, what)


def is_root() -> bool:
    return os.geteuid() == 0


def require_root(operation: str) -> None:
    if not is_root():
        raise NotRootError(operation)
