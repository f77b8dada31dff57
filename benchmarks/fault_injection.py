#!/usr/bin/env python3
"""Interrupt `backburner bench` in every phase, many times, and check that nothing is left.

For each phase of a small bench run (device: testbed image, loop device, mkfs, mount;
discovery: strace of the probe; layout: fio laying out the load's files; trials; report),
the run is interrupted at a random moment inside that phase with SIGINT (to its process
group, as a terminal's ^C), SIGTERM, or SIGKILL followed by `backburner restore`. After each
interruption it checks, by PID and by the filesystem:

* no process of the run survives (none has its cwd, an open file or its command line in the
  run's state directory), and two seconds later still none has appeared;
* no loop device is backed by a file of the run, nothing is mounted under it, the work root
  is empty (nothing was written beneath an unmounted testbed), no journal is left;
* no cgroup of the run is left, and nothing new of backburner's in /tmp, /dev/shm or
  /var/tmp;
* every trial the run reported as done (its `[k/N]` progress lines, printed after each
  commit) is in the database: committed trials lost = 0.

Phase boundaries come from a first, uninterrupted run with --debug ("phase: NAME" lines).

    python benchmarks/fault_injection.py [--per-phase 3] [--seed 1] [--phases trials,report]
        [--kinds SIGTERM]

With --commands, every other command that changes the machine instead (fault_commands.py):

    python benchmarks/fault_injection.py --commands all [--per-phase 4] [--seed 1]

Needs root (it runs real benches on loop devices). Prints one line per injection and a table.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PHASES = ("device", "discovery", "layout", "trials", "report")
ALL_PHASES = ("start-up", *PHASES)
KINDS = ("SIGINT", "SIGTERM", "SIGKILL+restore")
BENCH = ["--probe", "/bin/true", "--load", "readers:2:seq", "--policy", "background",
         "--scheduler", "mq-deadline", "--scheduler", "bfq", "--device", "testbed:512M",
         "--trials", "2", "--settle", "0.3", "--seed", "5"]
#: fio files small enough that layout takes a moment, not minutes
SMALL_FIO = "from backburner.bench import loads; loads.FIO_FILE_SIZE = '48m'"


@dataclass
class Outcome:
    phase: str
    kind: str
    at_s: float
    status: int | None
    problems: list[str] = field(default_factory=list)
    reported: int = 0
    stored: int = 0

    @property
    def restored(self) -> bool:
        return not self.problems

    @property
    def lost(self) -> int:
        return max(0, self.reported - self.stored)


def _command(debug: bool, db: Path) -> list[str]:
    code = f"import sys; {SMALL_FIO}; from backburner.cli import main; sys.exit(main())"
    return [sys.executable, "-c", code, *(["--debug"] if debug else []), "bench", *BENCH,
            "-o", str(db), "--export-html", str(db.with_suffix(".html"))]


def _run(state: Path, db: Path, debug: bool) -> subprocess.Popen[bytes]:
    env = {**os.environ, "BACKBURNER_STATE_DIR": str(state)}
    return subprocess.Popen(_command(debug, db), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def phase_times(workdir: Path) -> dict[str, tuple[float, float]]:
    """(start, end) of every phase, seconds after launch, from one uninterrupted run."""
    state = Path(tempfile.mkdtemp(dir=workdir))
    proc = _run(state, state / "r.db", debug=True)
    t0 = time.monotonic()
    starts: dict[str, float] = {}
    assert proc.stderr is not None
    for raw in proc.stderr:
        m = re.search(rb"phase: (\w+)", raw)
        if m:
            starts[m.group(1).decode()] = time.monotonic() - t0
    proc.wait()
    end = time.monotonic() - t0
    if proc.returncode != 0 or set(starts) != set(PHASES):
        sys.exit(f"the reference run failed (status {proc.returncode}, phases {starts})")
    order = sorted(starts, key=starts.get)  # type: ignore[arg-type]
    return {p: (starts[p], starts[order[i + 1]] if i + 1 < len(order) else end)
            for i, p in enumerate(order)}


def _referring_pids(path: str) -> list[int]:
    """Processes whose cwd, open files or command line lie in `path`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            links = [os.readlink(f"/proc/{entry.name}/cwd")]
            links += [os.readlink(f"/proc/{entry.name}/fd/{fd}")
                      for fd in os.listdir(f"/proc/{entry.name}/fd")]
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
        except OSError:
            continue
        if any(link.startswith(path) for link in links) or path.encode() in cmdline:
            found.append(int(entry.name))
    return found


def leftovers(state: Path, bench_pid: int) -> list[str]:
    root = str(state)
    problems = [f"process {p} still uses the run's files" for p in _referring_pids(root)]
    for dev in Path("/sys/block").glob("loop*"):
        try:
            backing = (dev / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if backing.startswith(root):
            problems.append(f"{dev.name} still backed by {backing}")
    for line in Path("/proc/self/mounts").read_text().splitlines():
        if line.split()[1].startswith(root):
            problems.append(f"still mounted: {line.split()[1]}")
    work = state / "work"
    if work.is_dir() and any(work.iterdir()):
        problems.append(f"left in the work root: {sorted(p.name for p in work.iterdir())}")
    journal = state / "journal"
    if journal.is_dir() and any(journal.iterdir()):
        problems.append(f"journals left: {sorted(p.name for p in journal.iterdir())}")
    for hier in Path("/sys/fs/cgroup").iterdir():
        problems += [f"cgroup left: {g}" for g in (hier / "backburner").glob(
            f"bench-{bench_pid}-*")]
    return problems


def scratch() -> set[str]:
    """backburner's scratch in the machine's shared places (it belongs in the journaled work
    root: anything new here after a run is a leak)."""
    return {str(p) for pattern in ("tmp/backburner*", "dev/shm/backburner*",
                                   "var/tmp/backburner*")
            for p in Path("/").glob(pattern)}


def _stored(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return int(conn.execute("SELECT count(*) FROM trials").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def inject(workdir: Path, phase: str, kind: str, delay_s: float) -> Outcome | None:
    """One run, signalled `delay_s` after it announced `phase` ("phase: NAME" on stderr with
    --debug). Its phase is then the one it really was in when signalled (its own lines);
    None when it had already finished (nothing was injected)."""
    state = Path(tempfile.mkdtemp(dir=workdir))
    db = state / "r.db"
    shared_before = scratch()
    proc = _run(state, db, debug=True)
    assert proc.stderr is not None
    lines: list[bytes] = []
    for raw in proc.stderr:  # until the phase starts
        lines.append(raw)
        if f"phase: {phase}".encode() in raw:
            break
    rest: list[bytes] = []
    reader = threading.Thread(target=lambda: rest.extend(proc.stderr))  # type: ignore[arg-type]
    reader.start()
    time.sleep(delay_s)
    seen = len(rest)
    if kind == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's ^C does: the whole group
    elif kind == "SIGTERM":
        proc.send_signal(signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=120)
    reader.join()
    if proc.returncode == 0:
        _cleanup(state)
        return None
    before = lines + rest[:seen]
    phases = [m.group(1).decode() for raw in before if (m := re.search(rb"phase: (\w+)", raw))]
    err = b"".join(lines + rest)
    reported = max([int(m) for m in re.findall(rb"^\[(\d+)/\d+\]", err, re.M)], default=0)
    out = Outcome(phases[-1] if phases else phase, kind, delay_s, proc.returncode,
                  reported=reported, stored=_stored(db))
    if kind == "SIGKILL+restore":
        env = {**os.environ, "BACKBURNER_STATE_DIR": str(state)}
        r = subprocess.run([sys.executable, "-m", "backburner", "restore"], env=env,
                           capture_output=True, timeout=120)
        if r.returncode != 0:
            out.problems.append(f"restore failed: {r.stderr.decode(errors='replace')[-300:]}")
    elif proc.returncode not in (130, 143):
        out.problems.append(f"status {proc.returncode}: "
                            + err.decode(errors="replace")[-300:])
    out.problems += leftovers(state, proc.pid)
    out.problems += [f"scratch left: {x}" for x in sorted(scratch() - shared_before)]
    time.sleep(2)  # a stray helper would write again by now
    out.problems += [f"2 s later: {p}" for p in leftovers(state, proc.pid)]
    if out.lost:
        out.problems.append(f"{out.lost} committed trial(s) lost")
    _cleanup(state)
    return out


def _cleanup(state: Path) -> None:
    if not _referring_pids(str(state)) and not leftovers(state, 0):
        subprocess.run(["rm", "-rf", str(state)], check=False)


def run(per_phase: int, seed: int, report=print, phases: tuple[str, ...] = PHASES,
        kinds: tuple[str, ...] = KINDS) -> list[Outcome]:
    """Every phase `per_phase` times per kind of interruption; returns the outcomes."""
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="bb-faults-"))
    os.chmod(workdir, 0o700)
    windows = phase_times(workdir)
    outcomes = []
    for phase in phases:
        start, end = windows[phase]
        for kind in kinds:
            done = tries = 0
            while done < per_phase and tries < 4 * per_phase:
                tries += 1
                delay = rng.uniform(0, max(0.0, end - start) * 0.9)
                o = inject(workdir, phase, kind, delay)
                if o is None:
                    continue  # the run had finished: nothing injected; draw again
                report(f"{o.phase:<9} {kind:<15} {delay:5.2f} s into {phase:<9} -> "
                       f"status {o.status}: "
                       + ("restored" if o.restored else "; ".join(o.problems)))
                outcomes.append(o)
                done += 1
            if done < per_phase:
                report(f"{phase:<9} {kind:<15} only {done} of {per_phase} injections landed "
                       "before the run ended")
    subprocess.run(["rm", "-rf", str(workdir)], check=False)
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    lines = ["| phase | faults injected | fully restored | committed trials lost |",
             "| --- | --- | --- | --- |"]
    for phase in ALL_PHASES:
        mine = [o for o in outcomes if o.phase == phase]
        if not mine:
            continue
        lines.append(f"| {phase} | {len(mine)} | {sum(o.restored for o in mine)} | "
                     f"{sum(o.lost for o in mine)} |")
    lines.append(f"| **all** | {len(outcomes)} | {sum(o.restored for o in outcomes)} | "
                 f"{sum(o.lost for o in outcomes)} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--per-phase", type=int, default=3,
                   help="injections per phase and kind (default 3)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--phases", default=",".join(PHASES),
                   help=f"comma-separated, of {', '.join(PHASES)} (default: all)")
    p.add_argument("--kinds", default=",".join(KINDS),
                   help=f"comma-separated, of {', '.join(KINDS)} (default: all)")
    p.add_argument("--commands", metavar="LIST",
                   help="the other commands instead of bench: comma-separated names of "
                   "fault_commands.SCENARIOS, or all")
    args = p.parse_args()
    if args.commands:
        return _commands(args)
    phases, kinds = tuple(args.phases.split(",")), tuple(args.kinds.split(","))
    if not set(phases) <= set(PHASES) or not set(kinds) <= set(KINDS):
        p.error(f"--phases: {', '.join(PHASES)}; --kinds: {', '.join(KINDS)}")
    # started in the background by a shell, we (and so the benches) would ignore SIGINT, and
    # every ^C injection would miss: a terminal's ^C reaches a process that handles it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.geteuid() != 0:
        sys.exit("fault_injection.py needs root (it runs real benches on loop devices)")
    outcomes = run(args.per_phase, args.seed, phases=phases, kinds=kinds)
    print(table(outcomes))
    return 0 if all(o.restored for o in outcomes) else 1


def _commands(args: argparse.Namespace) -> int:
    import fault_commands

    names = (list(fault_commands.SCENARIOS) if args.commands == "all"
             else args.commands.split(","))
    unknown = [n for n in names if n not in fault_commands.SCENARIOS]
    if unknown or not set(args.kinds.split(",")) <= set(KINDS):
        sys.exit(f"--commands: {', '.join(fault_commands.SCENARIOS)} or all; "
                 f"--kinds: {', '.join(KINDS)}")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.geteuid() != 0:
        sys.exit("fault_injection.py needs root (the commands change the machine)")
    outcomes = fault_commands.run(names, args.per_phase, args.seed,
                                  kinds=tuple(args.kinds.split(",")))
    print(fault_commands.table(outcomes))
    return 0 if all(o.restored for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
