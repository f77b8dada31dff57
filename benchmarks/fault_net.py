"""The network commands' part of the fault campaign (fault_commands.py): an interface of
the harness's own for `run --net` and `govern net`, a study file for `bench --study`, and
a watch on what a run journals, so that the check after it looks for exactly the
namespaces, groups and BPF programs that run made.

The namespaces, groups and programs of a network run have random names (a testbed's
token, a probe's group) or only ids, and a test suite running beside the campaign makes
the same kinds: a count of them before and after would report its work too. What the run
journaled is known, though (the journal line is written before each change): the watch
reads the run's journals while it runs, and once it is over every namespace, group and
program named there must be gone, unless its journal line says it was there before.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import threading
from pathlib import Path
from typing import Any

#: The harness's own interface: a veth pair in a namespace of its own, both ends up.
DEV = "bbfa0"


def _sh(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          check=False).stdout


def netdev(d: Path) -> None:
    """A namespace with a veth pair for `run --net` and `govern net` to shape (its name
    kept in d/netns)."""
    ns = f"bbf{secrets.token_hex(3)}"
    _sh("ip", "netns", "add", ns)
    _sh("ip", "-n", ns, "link", "add", DEV, "type", "veth", "peer", "name", "bbfb0")
    for dev in (DEV, "bbfb0"):
        _sh("ip", "-n", ns, "link", "set", dev, "up")
    (d / "netns").write_text(ns)


def netns_of(d: Path) -> str:
    return (d / "netns").read_text().strip()


def drop_netdev(d: Path) -> None:
    if (d / "netns").exists():
        _sh("ip", "netns", "del", netns_of(d))


def tc_state(d: Path) -> set[str]:
    """Every qdisc, class and filter on the harness's interface, and its links."""
    if not (d / "netns").exists():
        return set()
    ns = netns_of(d)
    found = set()
    for what in ("qdisc", "class", "filter"):
        found |= {f"{what}: {line.strip()}" for line in
                  _sh("tc", "-n", ns, what, "show", "dev", DEV).splitlines() if line.strip()}
    found |= {f"link: {line.split(':')[1].strip()}" for line in
              _sh("ip", "-n", ns, "-o", "link", "show").splitlines()}
    return found


STUDY = """\
probe = ["/bin/true"]
load = ["cmd:sleep 600"]
policy = ["default", "background"]
scheduler = ["none"]
device = "testbed:128M"
trials = 1
warmup = 0
settle = 0.3
"""


def study(d: Path) -> None:
    (d / "study.toml").write_text(STUDY)


class JournalWatch:
    """What a run journals (its state directory's journals, read every 10 ms until
    `stop`, and once more then): the network namespaces, cgroups and BPF programs it
    made, by name, path and id, with those there before (`old`) left out."""

    def __init__(self, state: Path) -> None:
        self.journal = state / "journal"
        self.lines: dict[str, dict[int, dict[str, Any]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(0.01):
            self._read()

    def _read(self) -> None:
        if not self.journal.is_dir():
            return
        for path in self.journal.glob("*.jsonl"):
            try:
                text = path.read_text()
            except OSError:
                continue  # undone and removed meanwhile
            seen = self.lines.setdefault(path.name, {})
            for line in text.splitlines():
                try:
                    ev = json.loads(line)
                except ValueError:
                    break  # being written
                if ev.get("event") == "intent":
                    seen.setdefault(ev["seq"], {}).update(ev)
                elif ev.get("event") == "applied" and ev.get("seq") in seen:
                    seen[ev["seq"]]["result"] = ev["result"]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._read()

    def made(self) -> dict[str, set[str]]:
        """{"netns": names, "cgroup": paths, "bpf program": ids, "bpf map": ids} the run
        journaled as its own (not there before)."""
        out: dict[str, set[str]] = {k: set() for k in ("netns", "cgroup", "bpf program",
                                                       "bpf map")}
        for entries in self.lines.values():
            for ev in entries.values():
                spec, old, result = ev.get("spec", {}), ev.get("old"), ev.get("result")
                if ev.get("kind") == "netns" and old is None:
                    out["netns"].add(spec["name"])
                elif ev.get("kind") == "cgroup" and not old and not spec.get("shared"):
                    out["cgroup"].add(spec["path"])
                if not isinstance(result, dict):
                    continue
                pinned = dict(result.get("ids") or {})  # PinnedPrograms: by pin name
                maps = [result.get("map"), pinned.pop("window", None)]
                progs = [result.get("prog"), *pinned.values()]
                out["bpf program"] |= {str(i) for i in progs if i}
                out["bpf map"] |= {str(i) for i in maps if i}
        return out


def leftovers(made: dict[str, set[str]]) -> list[str]:
    """What of `made` is still there: a namespace, a group, a program or a map."""
    from backburner.kernel.bpf import calls as bpf

    left = [f"netns left: {n}" for n in sorted(made["netns"]) if Path("/run/netns", n).exists()]
    left += [f"cgroup left: {p}" for p in sorted(made["cgroup"]) if Path(p).is_dir()]
    for what, get in (("bpf program", bpf.program_fd), ("bpf map", bpf.map_fd)):
        for ident in sorted(made[what]):
            fd = get(int(ident))
            if fd is not None:
                os.close(fd)
                left.append(f"{what} left: id {ident}")
    return left


#: `govern net` pins its programs in a bpffs at /sys/fs/bpf, which this host may not
#: mount: it runs in a mount namespace of its own with one there (gone with it).
PRIVATE_BPFFS = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                 'mount -t bpf -o mode=0700 bpf /sys/fs/bpf && exec "$@"', "sh"]
