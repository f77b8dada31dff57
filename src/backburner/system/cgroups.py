"""Cgroups we create, processes we move into them, controllers we enable, freezers we
toggle; and the clean-up of our own empty groups that outlived every record of them."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..base.errors import SystemStateError
from ..kernel import cgroups as kcgroups
from ..kernel import procfs
from .change import Change, write
from .journal import JournalInfo, journal_entries, journals
from .mounts import Mount

log = logging.getLogger(__name__)


@dataclass
class CgroupDir(Change):
    """A cgroup we create, with settings written into it. Undo moves what is left in it to
    where we were when we made it (the job's children that outlived it go back beside the
    job's starter, never into a shared group) and removes it."""

    kind: ClassVar[str] = "cgroup"
    makes: ClassVar[bool] = True
    path: str
    settings: dict[str, str] = field(default_factory=dict)
    shared: bool = False  # a parent other runs may use too: removed only when empty
    #: the settings of this group's parent where that parent is a shared group of ours
    #: journaled just before: another run that leaves it empty removes it, and it is made
    #: again (with them) if that happened between the two changes
    shared_parent: dict[str, str] | None = None

    def describe(self) -> str:
        sets = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        return f"cgroup {self.path}" + (f" ({sets})" if sets else "")

    def spec(self) -> dict[str, Any]:
        """As journaled: without `shared_parent` where there is none, so that a journal of
        a group made without it reads as before."""
        out = dict(self.__dict__)
        if out.get("shared_parent") is None:
            out.pop("shared_parent", None)
        return out

    def read(self) -> bool:
        return os.path.isdir(self.path)

    def existed(self, old: Any) -> bool:
        """A group there before is not ours, except the shared parent: backburner's own by
        its name, removed by whichever run leaves it empty (rmdir never takes a group
        that holds a process or a group)."""
        return bool(old) and not self.shared

    def apply(self) -> dict[str, Any]:
        return self.apply_with(lambda _partial: None)

    def apply_with(self, record: Callable[[Any], None]) -> dict[str, Any]:
        evict_to = kcgroups.dir_of(os.getpid(), self.path)
        made = self._mkdir()
        if self.settings:  # made: a setting that fails below still leaves it ours
            record({"evict_to": evict_to, "made": made})
        _write_settings(self.path, self.settings)
        return {"evict_to": evict_to, "made": made}

    def _mkdir(self) -> bool:
        """Make the group; False when it was there already (someone else's, made since
        `read`). A shared parent that another run removed after we journaled it (empty for
        an instant: seen with two commands at once on cgroup v1) is made again."""
        parent = os.path.dirname(self.path)
        for _ in range(20):
            if not os.path.isdir(parent):
                if self.shared_parent is None:
                    raise SystemStateError(f"cgroup parent {parent} does not exist")
                try:
                    try:
                        os.mkdir(parent)
                    except FileExistsError:
                        pass  # another run made it again first, maybe without our settings
                    _write_settings(parent, self.shared_parent)  # "+io" twice is harmless
                except FileNotFoundError:
                    continue  # its own parent went: the loop ends in the error below
                except SystemStateError:
                    if os.path.isdir(parent):
                        raise
                    continue  # removed again while its settings were written
                except OSError as err:
                    raise SystemStateError(
                        f"could not create cgroup {parent}: {err.strerror}") from None
            try:
                os.mkdir(self.path)
                return True
            except FileExistsError:
                return False
            except FileNotFoundError:
                continue  # the shared parent went between the check and the mkdir
            except OSError as err:
                raise SystemStateError(
                    f"could not create cgroup {self.path}: {err.strerror}") from None
        raise SystemStateError(f"cgroup parent {parent} kept disappearing",
                               "another program removes backburner's groups as they are made")

    def undo(self, old: Any, result: Any) -> str | None:
        if self.shared:  # ours by name: removed by whichever run leaves it empty
            try:
                os.rmdir(self.path)
            except FileNotFoundError:
                return None
            except OSError:
                return f"kept {self.path}: another run still uses it"
            return None
        if old or not os.path.isdir(self.path) or (result or {}).get("made") is False:
            return None  # it existed before us, or it is already gone
        target = (result or {}).get("evict_to")
        if not target or not os.path.isdir(target) or target.startswith(self.path + "/"):
            target = os.path.dirname(self.path)
        for _ in range(50):
            for pid in kcgroups.pids(self.path):
                try:
                    write(kcgroups.procs_file(target), str(pid))
                except SystemStateError:
                    pass  # exited meanwhile
            try:
                os.rmdir(self.path)
                return None
            except FileNotFoundError:
                return None
            except OSError:
                time.sleep(0.02)  # a just-exited task is still being released
        raise SystemStateError(f"could not remove cgroup {self.path}: it stays busy")


def _write_settings(path: str, settings: dict[str, str]) -> None:
    """Write a group's settings into its files."""
    for names, value in settings.items():
        # "a|b": the first file that exists (io.bfq.weight where BFQ is loaded, else
        # io.weight); "a?": written only where it exists. Which ones exist is only known
        # inside the new group.
        optional = names.endswith("?")
        found = [n for n in names.removesuffix("?").split("|")
                 if os.path.exists(os.path.join(path, n))]
        if not found and optional:
            continue
        if not found:
            raise SystemStateError(
                f"cgroup file {names} does not exist in {path}",
                "the controller or IO scheduler providing it is not available",
            )
        write(os.path.join(path, found[0]), value)


def v1_groups(controller: str, proc_cgroups: str = "/proc/cgroups") -> tuple[int, int]:
    """(the id of the v1 hierarchy `controller` is bound to, 0 for none; how many groups
    that hierarchy has), from /proc/cgroups; (0, 0) where the kernel lacks it."""
    try:
        with open(proc_cgroups) as f:
            rows = [line.split() for line in f if not line.startswith("#")]
    except OSError:
        return 0, 0
    row = next((r for r in rows if len(r) >= 3 and r[0] == controller), None)
    return (int(row[1]), int(row[2])) if row else (0, 0)


@dataclass
class V1Hierarchy(Mount):
    """A cgroup v1 hierarchy we mount for a run (its controllers are the `options`). The
    kernel destroys a v1 hierarchy at its unmount only if no group is left in it, and a
    group just removed is released a moment later: unmounted at once, the hierarchy would
    stay bound to its controllers, out of sight, until the next boot. So the undo waits
    (a few seconds at most) for the groups to be gone first."""

    kind: ClassVar[str] = "cgroup-v1-mount"
    makes: ClassVar[bool] = True
    fstype: str = "cgroup"

    def undo(self, old: Any, result: Any) -> None:
        controllers = [c for c in self.options.split(",") if c and c not in ("nosuid", "nodev")]
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and any(
                v1_groups(c)[0] and v1_groups(c)[1] > 1 for c in controllers):
            time.sleep(0.02)
        super().undo(old, result)


@dataclass
class CgroupMove(Change):
    """A running process (all its threads) moved into one of our cgroups. Undo puts it back
    where it was, if it still lives and is still in ours (`run --pid`, `govern`)."""

    kind: ClassVar[str] = "cgmove"
    makes: ClassVar[bool] = False  # a process's group: put back
    pid: int
    path: str

    def describe(self) -> str:
        return f"process {self.pid} in cgroup {self.path}"

    def read(self) -> dict[str, Any]:
        start = procfs.start_time(self.pid)
        if start is None:
            raise SystemStateError(f"process {self.pid} is gone")
        return {"start": start, "from": kcgroups.dir_of(self.pid, self.path)}

    def apply(self) -> None:
        write(kcgroups.procs_file(self.path), str(self.pid))

    def undo(self, old: Any, result: Any) -> str | None:
        if not old or procfs.start_time(self.pid) != old.get("start"):
            return None  # gone, or the PID is someone else's now
        if kcgroups.dir_of(self.pid, self.path) != self.path or not old.get("from"):
            return None  # moved elsewhere since: not ours to move back
        if not os.path.isdir(old["from"]):
            return f"process {self.pid} stays in {self.path}: {old['from']} is gone"
        try:
            write(kcgroups.procs_file(old["from"]), str(self.pid))
        except SystemStateError:
            if procfs.start_time(self.pid) == old.get("start"):
                raise
        return None


@dataclass
class ControllersEnabled(Change):
    """cgroup v2: controllers switched on in a group's cgroup.subtree_control, so that its
    children get io.weight/cpu.weight files. Undo switches off those that were off."""

    kind: ClassVar[str] = "controllers"
    makes: ClassVar[bool] = False
    path: str  # .../cgroup.subtree_control
    controllers: list[str]

    def describe(self) -> str:
        return f"{self.path} +{' +'.join(self.controllers)}"

    def read(self) -> list[str]:
        try:
            return Path(self.path).read_text().split()
        except FileNotFoundError:
            raise SystemStateError(f"{self.path} does not exist") from None

    def apply(self) -> None:
        write(self.path, " ".join(f"+{c}" for c in self.controllers))

    def undo(self, old: Any, result: Any) -> None:
        if old is None or not os.path.exists(self.path):
            return
        for ctrl in self.controllers:
            if ctrl not in old:
                try:
                    write(self.path, f"-{ctrl}")
                except SystemStateError:
                    log.warning("%s stays enabled in %s: other groups use it", ctrl, self.path)


@dataclass
class DeviceLine(Change):
    """One device's line in a per-device cgroup v2 file: the io.latency target of a group,
    io.cost on or off in the root's io.cost.qos. Undo writes back the device's old line,
    or `off` for it (``target=max``, ``enable=0``) when the file had none."""

    kind: ClassVar[str] = "cgdevline"
    makes: ClassVar[bool] = False
    path: str
    line: str  # "MAJ:MIN key=value ..."
    off: str

    @property
    def devno(self) -> str:
        return self.line.split(" ", 1)[0]

    def describe(self) -> str:
        return f"{self.path}: {self.line}"

    def _current(self) -> str | None:
        text = Path(self.path).read_text()
        return next((ln.strip() for ln in text.splitlines()
                     if ln.split(" ", 1)[0] == self.devno), None)

    def read(self) -> str | None:
        try:
            return self._current()
        except FileNotFoundError:
            raise SystemStateError(f"{self.path} does not exist",
                                   "the kernel or the group lacks this io control") from None

    def apply(self) -> None:
        write(self.path, self.line)

    def undo(self, old: Any, result: Any) -> None:
        if not os.path.exists(self.path):
            return  # the group (or the device) is gone, and its setting with it
        back = old or f"{self.devno} {self.off}"
        if self._current() != old:
            write(self.path, back)


@dataclass
class CgroupFreezer(Change):
    """The freezer of one of our cgroups (v1 `freezer.state`, v2 `cgroup.freeze`), which
    `govern` toggles in short, bounded slices while interactive work is stalled on IO.
    apply() changes nothing; freeze()/thaw() do, and undo() thaws whatever state is left,
    so a daemon stopped, crashed or killed mid-pause never leaves the bulk work frozen
    (after a SIGKILL, `backburner restore` replays this undo)."""

    kind: ClassVar[str] = "freezer"
    makes: ClassVar[bool] = False
    path: str
    version: int = 1

    def describe(self) -> str:
        return f"freezer of {self.path}"

    @property
    def _file(self) -> str:
        return os.path.join(self.path, "freezer.state" if self.version == 1
                            else "cgroup.freeze")

    def read(self) -> bool:
        try:
            return self.frozen()
        except FileNotFoundError:
            raise SystemStateError(f"{self._file} does not exist",
                                   "no cgroup freezer for this group") from None

    def frozen(self) -> bool:
        text = Path(self._file).read_text().strip()
        return text in ("FROZEN", "FREEZING") if self.version == 1 else text == "1"

    def apply(self) -> None:
        pass

    def freeze(self) -> None:
        write(self._file, "FROZEN" if self.version == 1 else "1")

    def thaw(self) -> None:
        write(self._file, "THAWED" if self.version == 1 else "0")

    def undo(self, old: Any, result: Any) -> None:
        if os.path.exists(self._file):
            self.thaw()


def prune_empty_cgroups(report: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Remove our empty groups (`backburner/*` in every hierarchy, then `backburner` itself)
    whose owner is gone: what is left when a job outlived every record of it.

    A group's name carries the PID and start time of what owns it (run-PID-START,
    pid-PID-START, bench-PID-START-...): while that process lives the group is left alone,
    even when it is empty for a moment (a bench's group before its load starts) and even
    when its journal is in another state directory; a new process that got the same PID
    does not keep it. govern's groups (govern-RULE) belong to its live journal."""
    owned = {r.get("path") for info in journals() if info.alive for r in _cgroup_specs(info)}
    removed = []
    for top in _our_cgroup_tops():
        for child in sorted(p for p in top.iterdir() if p.is_dir()):
            if str(child) in owned or kcgroups.pids(str(child)) or _owner_alive(child.name):
                continue
            try:
                child.rmdir()
            except OSError:
                continue
            removed.append(str(child))
            report(f"removed empty cgroup {child}")
        try:
            top.rmdir()
            removed.append(str(top))
        except OSError:
            pass
    return removed


def _owner_alive(name: str) -> bool:
    """run-PID-START, pid-PID-START, bench-PID-START-...: the owner tag after the kind."""
    parts = name.split("-")
    return len(parts) > 1 and procfs.owner_alive("-".join(parts[1:3]))


def _our_cgroup_tops() -> list[Path]:
    root = Path("/sys/fs/cgroup")
    candidates = [root / "backburner", *(p / "backburner" for p in root.glob("*"))]
    return [p for p in candidates if p.is_dir() and not p.is_symlink()]


def _cgroup_specs(info: JournalInfo) -> list[dict[str, Any]]:
    _, entries = journal_entries(info.journal)
    return [e.change.spec() for e in entries if isinstance(e.change, CgroupDir)]
