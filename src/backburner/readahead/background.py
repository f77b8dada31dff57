"""A replay in a detached child, for a start that should not wait for it: a fork of this
process at idle CPU and IO priority, named so `ps` shows it and `record` leaves its reads
out.

Apart from `replay` (the reading itself) because it is about a process, not about pages:
its name, its priorities, and that it outlives its starter.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..base.errors import BackburnerError
from ..kernel import priorities
from ..policy import grammar
from .replay import ReplayOptions, replay

if TYPE_CHECKING:
    from .. import spawn

#: The background child as a whole: idle CPU and IO, so its checks (a stat of every file)
#: do not compete with the start it prepares; its worker thread then takes the IO class its
#: order calls for.
BACKGROUND_POLICY = grammar.Policy("readahead", io=priorities.IOPrio("idle"),
                                    cpu=priorities.CPUPolicy("idle"))


#: Its process name (comm): `ps` shows it, and `record` leaves its reads out.
CHILD_NAME = "bb-replay"


def start_background(pack_path: str, opts: ReplayOptions) -> spawn.Child:
    """The same replay in a detached child (it outlives us; it ends by its deadline): a
    fork of this process, which has the code loaded already. A new interpreter would
    start cold beside the start it prepares and cost it more than the replay saves on a
    fast device (docs/measurements/readahead.md has the figures). Its exit status is the
    CLI's for the same error (65 for a pack that went bad meanwhile)."""
    from .. import spawn
    from . import packfile

    path = os.path.abspath(pack_path)

    def work() -> int:
        try:
            replay(packfile.load(path), opts)
        except BackburnerError as err:
            return err.exit_status
        return 0

    return spawn.fork_call(work, name=CHILD_NAME, policy=BACKGROUND_POLICY, new_group=True,
                           detached=True)
