"""Transactions over system state: the only package that changes it.

Every change is a small `Change` class with `read()` (the old state), `apply()` and
`undo()`, in one module per family of change (values, cgroups, files, mounts, loops,
processes, net, tc, ...). A `Transaction` writes each change's intent and old state to an
on-disk journal *before* applying it (fsync'd), and undoes everything in reverse order
when it ends: normally, on an exception, on SIGINT or SIGTERM (turned into exceptions by
`interrupts.install`). After a SIGKILL or a power loss the journal is still on disk, and
`restore_stale()` (``backburner restore``, and the start of every command that changes
state) replays it. Every `undo` is idempotent and checks the current state first, because
after a crash it may run for a change that was only half applied.

Importing the package imports every family, so a journal's replay finds every kind.
"""

from .bpf import (
    CgroupPacketPriority,
    CgroupSocketPriority,
    CgroupSockOps,
    PinnedPrograms,
    pinned_ids,
    window_map,
)
from .cgroups import (
    CgroupDir,
    CgroupFreezer,
    CgroupMove,
    ControllersEnabled,
    DeviceLine,
    V1Hierarchy,
    prune_empty_cgroups,
    v1_groups,
)
from .change import Change, selected
from .files import InstalledFile, MadeDir, MadeFile, PrivateDir, remove_tree
from .journal import Entry, Journal, JournalInfo, journals, stale_journals
from .loops import LoopDevice, is_loop_over, loops_backed_by
from .modules import KernelModule, module_available, module_loaded
from .mounts import (
    Filesystem,
    FuseMount,
    Mount,
    is_mountpoint,
    mount_options,
    mounts_under,
)
from .net import (
    Address,
    Link,
    LinkUp,
    NetNamespace,
    link_counters,
    link_info,
    netns_path,
    socket_in,
)
from .paths import (
    DEFAULT_STATE_DIR,
    is_root,
    journal_dir,
    require_root,
    state_dir,
    trusted_dir,
    work_root,
)
from .processes import Daemon, Inherited, Priorities, PrioritiesFirst, Started
from .tc import (
    BpfClassifier,
    ClassidClassifier,
    Qdisc,
    TcClass,
    TcFilter,
    change_class,
    qdisc_backlog,
    qdiscs,
    tc_classes,
    tc_filters,
)
from .tracefs import PERF_TRACEFS, ensure_tracefs, perf_namespace, tracefs_mount
from .transaction import (
    LiveTransaction,
    Transaction,
    commit,
    recover,
    restore_stale,
    undo_journal,
)
from .units import DelegatedScope, TransientScope, UnitFrozen, UnitWeights
from .values import SysfsValue, drop_caches, psi_trigger

__all__ = [
    "DEFAULT_STATE_DIR", "Address", "CgroupDir", "CgroupFreezer", "CgroupMove",
    "BpfClassifier", "ClassidClassifier", "CgroupPacketPriority", "CgroupSockOps",
    "CgroupSocketPriority", "V1Hierarchy", "v1_groups",
    "Change", "Link", "LinkUp", "NetNamespace", "Qdisc", "TcClass", "TcFilter",
    "ControllersEnabled", "Daemon", "DelegatedScope", "DeviceLine", "Entry", "Filesystem",
    "FuseMount", "Inherited",
    "InstalledFile",
    "Journal", "JournalInfo", "KernelModule", "LiveTransaction", "LoopDevice", "MadeDir",
    "MadeFile", "Mount", "PERF_TRACEFS",
    "PinnedPrograms", "Priorities", "PrioritiesFirst", "PrivateDir", "Started", "SysfsValue",
    "Transaction",
    "TransientScope", "UnitFrozen", "UnitWeights",
    "commit", "drop_caches", "ensure_tracefs", "perf_namespace",
    "change_class", "link_counters", "link_info", "netns_path", "qdisc_backlog", "qdiscs",
    "socket_in", "tc_classes", "tc_filters",
    "is_mountpoint",
    "is_loop_over", "is_root", "journal_dir", "journals", "loops_backed_by",
    "module_available", "module_loaded", "pinned_ids", "mount_options", "mounts_under",
    "prune_empty_cgroups", "psi_trigger", "recover", "remove_tree", "require_root",
    "restore_stale", "selected", "stale_journals", "state_dir", "trusted_dir",
    "tracefs_mount", "undo_journal", "window_map", "work_root",
]
