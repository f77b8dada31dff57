"""Interrupt every command that changes the machine, at random moments, and check that
nothing is left: the fault injection of `bench`, for the other commands.

Each scenario runs one real command (a slowdisk, a recording, an image build, a traced run,
the govern daemon, ...) on files of its own, and sends it SIGINT (to its process group, as a
terminal's ^C), SIGTERM, or SIGKILL followed by `backburner restore`, at a random moment of
its run. Before and after, the whole machine is read: loop devices, mounts, our cgroups,
scratch files in /tmp, /dev/shm and /var/tmp, every block device's scheduler, read-ahead
and rotational flag, journals and the work root, processes that carry the run's marker in
their environment (whatever they were re-parented to), and the priorities and cgroups of a
target process the command re-prioritised. Anything new, or changed, is a problem.

    python benchmarks/fault_injection.py --commands all [--per-command 4] [--seed 1]

Run it on a quiet machine: a loop device or mount that something else makes meanwhile is
reported too. The network commands (`run --net`, `govern net`, `bench --net-link`, `bench
--study`) are checked besides on an interface of the harness's own and on what their
journals name (fault_net.py).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import fault_net

KINDS = ("SIGINT", "SIGTERM", "SIGKILL+restore")
#: A service still running this long after a signal that should have stopped it did not
#: get it (it stops within seconds)
LOST_AFTER_S = 60.0
BB = [sys.executable, "-m", "backburner"]
MARK = "BB_FAULT_RUN"


# --- what the machine looks like ---------------------------------------------------------


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _marked(mark: str) -> list[str]:
    """Processes whose environment carries the run's marker: the command and everything it
    started, wherever they were re-parented."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry.name}/environ").read_bytes()
            comm = _read(Path(f"/proc/{entry.name}/comm"))
        except OSError:
            continue
        if needle in env.split(b"\0"):
            found.append(f"{entry.name} ({comm})")
    return found


def _priorities(pid: int) -> tuple[str, ...]:
    """A target process's IO class, CPU policy, nice and cgroups, as text."""
    from backburner.kernel import priorities

    try:
        return (str(priorities.ioprio_get(pid)), str(os.sched_getscheduler(pid)),
                str(os.getpriority(os.PRIO_PROCESS, pid)),
                _read(Path(f"/proc/{pid}/cgroup")))
    except OSError:
        return ("gone",)


def _ours(d: Path, backing: str) -> bool:
    """A loop device's backing file is the run's (under d), or nobody's any more: a file
    of a lazily unmounted FUSE mount shows as "/disk.img"."""
    return backing.startswith(str(d)) or backing.count("/") == 1


def snapshot(d: Path, state: Path, target: int | None) -> dict[str, set[str]]:
    """What a command run in `d` (its state directory `state`) could leave behind, as
    comparable sets of text. Other processes' loop devices, mounts and cgroups (a test
    suite running beside it) are left out by where they live."""
    loops = {}
    for dev in Path("/sys/block").glob("loop*"):
        backing = _read(dev / "loop" / "backing_file").removesuffix(" (deleted)")
        if backing and _ours(d, backing):
            loops[dev.name] = backing
    mounts = {" ".join(line.split()[1:3]) for line in
              Path("/proc/self/mounts").read_text().splitlines()
              if line.split()[1].startswith(str(d)) or line.split()[2] == "tracefs"}
    cgroups = {str(g) for top in [Path("/sys/fs/cgroup/backburner"),
                                  *Path("/sys/fs/cgroup").glob("*/backburner")]
               if top.is_dir() for g in top.iterdir()
               if g.is_dir() and ("fault-target" in g.name or g.name.startswith(("run-",
                                                                                  "pid-")))}
    scratch = {str(p) for pattern in ("tmp/backburner*", "dev/shm/backburner*",
                                      "var/tmp/backburner*", "tmp/.backburner*")
               for p in Path("/").glob(pattern)}
    queues = {f"{q.parent.name} {name}={_read(q / name)}"
              for q in Path("/sys/block").glob("*/queue")
              if not q.parent.name.startswith("loop") or q.parent.name in loops
              for name in ("scheduler", "read_ahead_kb", "rotational")}
    ours = {str(p) for sub in ("journal", "work") if (state / sub).is_dir()
            for p in (state / sub).iterdir()}
    return {"loop device": {f"{k} {v}" for k, v in loops.items()}, "mount": mounts,
            "cgroup": cgroups, "scratch": scratch, "queue setting": queues, "state": ours,
            "target priorities": {" ".join(_priorities(target))} if target else set(),
            "interface": fault_net.tc_state(d)}


def differences(before: dict[str, set[str]], after: dict[str, set[str]]) -> list[str]:
    problems = []
    for what in before:
        if what == "queue setting":  # of devices there before and after
            devices = {x.split()[0] for x in before[what]} & {x.split()[0] for x in after[what]}
            problems += [f"changed: {x}" for x in sorted(after[what] - before[what])
                         if x.split()[0] in devices]
        elif what in ("target priorities", "interface"):
            if after[what] != before[what]:
                problems.append(f"target priorities {sorted(before[what])} -> "
                                f"{sorted(after[what])}")
        else:
            problems += [f"{what} left: {x}" for x in sorted(after[what] - before[what])]
    return problems


# --- the commands --------------------------------------------------------------------------


@dataclass
class Scenario:
    """One command, given a fresh private directory for its files."""

    name: str
    argv: Callable[[Path], list[str]]
    window_s: float  # signals land uniformly within this many seconds of the start
    setup: Callable[[Path], None] = lambda _d: None
    after_success: Callable[[Path, str, dict[str, str]], None] = lambda _d, _o, _e: None
    target: bool = False  # runs against a process we start (`{target}` in argv)
    #: the target as a hostile user makes it: escape sequences for a name (prctl), a
    #: forged line in its argv[0] (`exec -a`) and an argument that makes a rule's cmdline
    #: pattern run to its deadline; the command's output must show them escaped
    hostile: bool = False
    #: what a signal may end it with besides 130/143 and death by that signal (a command
    #: that mirrors its job's status dies as the job did)
    statuses: tuple[int, ...] = ()
    #: runs until it is stopped (a service): status 0 after the signal is its normal end,
    #: and the machine is checked after it as after any other
    until_stopped: bool = False
    wrap: list[str] = field(default_factory=list)  # what the command runs under
    #: how long the job the command runs lasts: ending well longer than this after the
    #: signal, the command ran its job to the end: the signal was lost on the way
    job_s: float | None = None


def _sh(*argv: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env,
                          check=False).stdout


def _testbed(d: Path) -> Path:
    """An ext4 on a loop device of the harness's own, mounted at d/mnt: what the commands
    read and record lives there, never on the machine's own disk."""
    (d / "bed.img").write_bytes(b"")
    os.truncate(d / "bed.img", 256 << 20)
    _sh("mkfs.ext4", "-q", str(d / "bed.img"))
    dev = _sh("losetup", "--find", "--show", str(d / "bed.img")).strip()
    (d / "mnt").mkdir()
    _sh("mount", dev, str(d / "mnt"))
    return d / "mnt"


def _files(d: Path, n: int = 60, size: int = 256 << 10) -> None:
    mnt = _testbed(d)
    (mnt / "src" / "lib").mkdir(parents=True)
    for i in range(n):
        (mnt / "src" / "lib" / f"f{i:03d}.bin").write_bytes(os.urandom(size))
    (mnt / "reader.sh").write_text(f"#!/bin/sh\ncat {mnt}/src/lib/* >/dev/null\n")
    (mnt / "reader.sh").chmod(0o755)
    os.sync()


def _pack(d: Path) -> None:
    _files(d)
    env = {**os.environ, "BACKBURNER_STATE_DIR": str(d / "prep-state")}
    subprocess.run([*BB, "readahead", "record", "--mount", str(d / "mnt"), "-o",
                    str(d / "p.pack"), "--", str(d / "mnt" / "reader.sh")], env=env,
                   check=True, capture_output=True, timeout=300)


def _image(d: Path) -> None:
    _pack(d)
    env = {**os.environ, "BACKBURNER_STATE_DIR": str(d / "prep-state")}
    subprocess.run([*BB, "layout", "build-ext4", "--pack", str(d / "p.pack"),
                    str(d / "mnt" / "src"), str(d / "built.img")], env=env, check=True,
                   capture_output=True, timeout=300)


def _cleanup(d: Path) -> None:
    """The harness's own testbed and whatever a failed injection left under d."""
    for line in reversed(Path("/proc/self/mounts").read_text().splitlines()):
        if line.split()[1].startswith(str(d)):
            _sh("umount", "-l", line.split()[1])
    for dev in Path("/sys/block").glob("loop*"):
        if _read(dev / "loop" / "backing_file").startswith(str(d)):
            _sh("losetup", "-d", f"/dev/{dev.name}")
    fault_net.drop_netdev(d)
    _sh("rm", "-rf", str(d))


def _remove_slowdisk(_d: Path, out: str, env: dict[str, str]) -> None:
    dev = next((w for w in out.split() if w.startswith("/dev/loop")), None)
    if dev:
        _sh(*BB, "slowdisk", "remove", dev, env=env)


def _unit_root(root: Path, unit: str) -> None:
    """An image root with the unit apply writes a drop-in for (apply refuses one that does
    not exist)."""
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    (root / "usr/lib/systemd/system" / unit).write_text("[Service]\nExecStart=/bin/true\n")


def _rules(d: Path) -> None:
    (d / "rules").mkdir(mode=0o755)
    (d / "rules" / "t.toml").write_text(
        '[[rule]]\nname = "fault-target"\nmatch = { comm = "bbfault-sleep" }\n'
        'io = "idle"\ncpu = "idle"\nio_weight = 10\n')


#: A name that sets the terminal's title, erases the line and returns to its start (the 15
#: bytes the kernel keeps), and an argv[0] that starts a forged line of the daemon's log.
HOSTILE_COMM = b"\x1b]2;pwned\x07\x1b[2K\r"
HOSTILE_ARGV0 = "bbfault-hostile\n=> rule apt governs it\x1b[1A\x1b[2K"


def _hostile_rules(d: Path) -> None:
    """A rule whose cmdline pattern (quadratic: taken when read) runs past its deadline on
    the hostile target's 3500 spaces, then one that governs it by its name."""
    comm = "".join(f"\\u{b:04x}" if b < 0x20 or b == 0x7f else chr(b) for b in HOSTILE_COMM)
    (d / "rules").mkdir(mode=0o755)
    (d / "rules" / "t.toml").write_text(
        f'[[rule]]\nname = "fault-slow"\nmatch = {{ comm = "{comm}", cmdline = \'\\s+$\' }}\n'
        'io = "idle"\n\n'
        f'[[rule]]\nname = "fault-target"\nmatch = {{ comm = "{comm}" }}\n'
        'io = "idle"\ncpu = "idle"\nio_weight = 10\n')


SCENARIOS = {
    "run": Scenario("run", lambda d: ["run", "--policy", "background", "--", "sh", "-c",
                                      f"dd if=/dev/zero of={d}/out bs=1M count=64 "
                                      "conv=fsync 2>/dev/null; sleep 1"], 2.0),
    "run --pid": Scenario(
        "run --pid", lambda d: ["run", "--pid", "{target}", "--policy", "background"], 0.6,
        after_success=lambda d, o, env: None, target=True),
    "slowdisk create": Scenario(
        "slowdisk create", lambda d: ["slowdisk", "create", "--profile", "hdd-5400",
                                      "--size", "64M", str(d / "slow.img")], 0.8,
        after_success=_remove_slowdisk),
    "readahead record": Scenario(
        "readahead record", lambda d: ["readahead", "record", "--mount", str(d / "mnt"),
                                       "--drop-caches", "-o", str(d / "r.pack"), "--",
                                       str(d / "mnt" / "reader.sh")], 0.6, setup=_files),
    "layout build-ext4": Scenario(
        "layout build-ext4", lambda d: ["layout", "build-ext4", "--pack", str(d / "p.pack"),
                                        str(d / "mnt" / "src"), str(d / "new.img")], 4.0,
        setup=_pack),
    "layout check": Scenario(
        "layout check", lambda d: ["layout", "check", "--pack", str(d / "p.pack"),
                                   str(d / "built.img")], 1.0, setup=_image),
    "trace record": Scenario(
        "trace record", lambda d: ["trace", "record", "--runs", "3", "-o", str(d / "t.json"),
                                   "--", str(d / "mnt" / "reader.sh")], 5.0, setup=_files),
    "govern run": Scenario(
        "govern run", lambda d: ["govern", "run", "--rules", str(d / "rules"),
                                 "--no-defaults"], 3.0, setup=_rules, target=True),
    "govern run (hostile names)": Scenario(
        "govern run (hostile names)", lambda d: ["govern", "run", "--rules", str(d / "rules"),
                                                 "--no-defaults"], 3.0, setup=_hostile_rules,
        target=True, hostile=True),
    "apply": Scenario(
        "apply", lambda d: ["apply", "--root", str(d / "root"), "--scheduler", "bfq",
                            "--unit", "fault-test.service", "--policy", "background"], 0.4,
        setup=lambda d: _unit_root(d / "root", "fault-test.service"),
        after_success=lambda d, o, env: _sh(*BB, "apply", "--root", str(d / "root"),
                                            "--remove", env=env)),
    "run --net": Scenario(
        "run --net", lambda d: ["run", "--net", "background", "--netns",
                                fault_net.netns_of(d), "--net-dev", fault_net.DEV,
                                "--net-uplink", "1mbit", "--", "sleep", "3"], 6.0,
        setup=fault_net.netdev, job_s=3.0),
    "govern net": Scenario(
        "govern net", lambda d: ["govern", "net", "--netns", fault_net.netns_of(d), "--dev",
                                 fault_net.DEV, "--uplink", "1mbit"], 6.0,
        setup=fault_net.netdev, until_stopped=True, statuses=(0,),
        wrap=fault_net.PRIVATE_BPFFS),
    "bench --net-link": Scenario(
        "bench --net-link", lambda d: ["bench", "--net-link", "1mbit:0ms", "--probe",
                                       "net:page", "--load", "download:1", "--policy",
                                       "background", "-r", "1", "-o", str(d / "n.db")], 30.0),
    "bench --study": Scenario(
        "bench --study", lambda d: ["bench", "--study", str(d / "study.toml"), "-o",
                                    str(d / "s.db")], 20.0, setup=fault_net.study),
}


@dataclass
class Outcome:
    command: str
    kind: str
    at_s: float
    status: int | None
    problems: list[str] = field(default_factory=list)

    @property
    def restored(self) -> bool:
        return not self.problems


def _target(mark: str, hostile: bool = False) -> subprocess.Popen[bytes]:
    """A process named bbfault-sleep (govern's rule matches it) with a thread of its own;
    `hostile`: named and started as `Scenario.hostile` says."""
    name = HOSTILE_COMM if hostile else b"bbfault-sleep"
    code = (f"import ctypes, threading, time; ctypes.CDLL(None).prctl(15, {name!r});"
            "threading.Thread(target=time.sleep, args=(600,), daemon=True).start();"
            "time.sleep(600)")
    argv = [HOSTILE_ARGV0, "-c", code, " " * 3500 + "x"] if hostile else ["python", "-c", code]
    return subprocess.Popen(argv, executable=sys.executable, env={**os.environ, MARK: mark},
                            start_new_session=True)


def _before_our_code(status: int, err: bytes) -> bool:
    """A ^C that landed while the Python runtime itself was starting (importing `site`,
    before any module of ours ran): Python reports it itself (a KeyboardInterrupt through
    its own frozen frames, status 1). Nothing of ours ran, so nothing can have changed --
    which the machine check after it still verifies."""
    return status == 1 and b"KeyboardInterrupt" in err and b"backburner" not in err


def _ours_if_owned(problem: str, owners: set[int]) -> bool:
    """A group named for its owner (run-PID-START, pid-PID-START) left behind counts when
    the owner is the command or its target: one of another run's (a test suite beside the
    campaign) is not this command's leftover."""
    name = problem.rsplit("/", 1)[-1]
    if not problem.startswith("cgroup left:") or not name.startswith(("run-", "pid-")):
        return True
    return name.split("-")[1] in {str(o) for o in owners}


def inject(workdir: Path, sc: Scenario, kind: str, delay_s: float) -> Outcome | None:
    """One run of `sc`, signalled `delay_s` after its start; None when it finished first."""
    d = Path(tempfile.mkdtemp(dir=workdir))
    state = d / "state"
    sc.setup(d)
    mark = uuid.uuid4().hex
    target = _target(mark, sc.hostile) if sc.target else None
    if target is not None:
        time.sleep(0.3)  # named and threaded before the command looks at it
    env = {**os.environ, "BACKBURNER_STATE_DIR": str(state), MARK: mark}
    before = snapshot(d, state, target.pid if target else None)
    argv = [a.replace("{target}", str(target.pid)) if target else a for a in sc.argv(d)]
    watch = fault_net.JournalWatch(state)
    proc = subprocess.Popen([*sc.wrap, *BB, *argv], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    time.sleep(delay_s)
    if kind == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM if kind == "SIGTERM" else signal.SIGKILL)
    signalled = time.monotonic()
    lost = None
    try:
        out, err = proc.communicate(timeout=LOST_AFTER_S if sc.until_stopped else 300)
    except subprocess.TimeoutExpired:  # the signal was lost: it runs on
        lost = f"still running {LOST_AFTER_S:.0f} s after {kind}: the signal was lost"
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        subprocess.run([*BB, "restore"], env=env, capture_output=True, timeout=300)
    after_s = time.monotonic() - signalled
    if proc.returncode == 0 and sc.job_s is not None and after_s > sc.job_s:
        lost = (f"ran its {sc.job_s:g} s job to the end, {after_s:.1f} s after {kind} "
                "(status 0): the signal was lost")
    outcome = Outcome(sc.name, kind, delay_s, proc.returncode)
    if lost:
        outcome.problems.append(f"{lost}; stderr: {err.decode()[-300:]}")
    elif proc.returncode == 0 and not sc.until_stopped:
        sc.after_success(d, out.decode() + err.decode(), env)
        if sc.name == "run --pid" and target is not None:
            _sh(*BB, "restore", "--pid", str(target.pid), env=env)
        outcome = None
    elif kind == "SIGKILL+restore":
        r = subprocess.run([*BB, "restore"], env=env, capture_output=True, timeout=300)
        if r.returncode != 0:
            outcome.problems.append(f"restore failed: {r.stderr.decode()[-300:]}")
        if sc.name == "run --pid" and target is not None:
            # killed after it handed its changes over to the target (its work done, as on
            # success): they are the target's until it exits, and `restore --pid` puts
            # them back; 66 when nothing was handed over
            r = subprocess.run([*BB, "restore", "--pid", str(target.pid)], env=env,
                               capture_output=True, timeout=300)
            if r.returncode not in (0, 66):
                outcome.problems.append(f"restore --pid failed: {r.stderr.decode()[-300:]}")
        if sc.name == "slowdisk create":
            # killed after it handed the disk over to its daemon (created, as on success):
            # a live slowdisk, which `slowdisk list` shows and `slowdisk remove` ends
            listed = subprocess.run([*BB, "slowdisk", "list"], env=env, capture_output=True,
                                    timeout=60)
            _remove_slowdisk(d, listed.stdout.decode(), env)
    elif proc.returncode not in (130, 143, -signal.SIGINT, -signal.SIGTERM, *sc.statuses) \
            and not _before_our_code(proc.returncode, err):
        outcome.problems.append(f"status {proc.returncode}: {err.decode()[-300:]}")
    watch.stop()
    if sc.hostile:
        raw = sorted({f"{ord(c):#04x}" for c in (out + err).decode(errors="replace")
                      if ord(c) < 0x20 and c not in "\t\n" or 0x7f <= ord(c) <= 0x9f})
        if raw:
            outcome = outcome or Outcome(sc.name, kind, delay_s, proc.returncode)
            outcome.problems.append(f"raw control characters in its output: {raw}")
    if outcome is not None:
        time.sleep(0.5)
        owners = {proc.pid, *([target.pid] if target else [])}
        outcome.problems += [p for p in differences(before, snapshot(
            d, state, target.pid if target else None)) if _ours_if_owned(p, owners)]
        made = watch.made()
        deadline = time.monotonic() + 5.0  # a group's programs go with it, a moment later
        while fault_net.leftovers(made) and time.monotonic() < deadline:
            time.sleep(0.1)
        outcome.problems += fault_net.leftovers(made)
        if target is not None:
            outcome.problems += [f"process left: {p}" for p in _marked(mark)
                                 if not p.startswith(f"{target.pid} ")]
        else:
            outcome.problems += [f"process left: {p}" for p in _marked(mark)]
    if target is not None:
        target.kill()
        target.wait()
    _cleanup(d)
    return outcome


def run(names: list[str], per_command: int, seed: int, report: Callable[[str], None] = print,
        kinds: tuple[str, ...] = KINDS) -> list[Outcome]:
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="bb-faults-"))
    os.chmod(workdir, 0o700)
    outcomes = []
    for name in names:
        sc = SCENARIOS[name]
        for kind in kinds:
            done = tries = 0
            while done < per_command and tries < 4 * per_command:
                tries += 1
                delay = rng.uniform(0.0, sc.window_s)
                o = inject(workdir, sc, kind, delay)
                if o is None:
                    continue
                report(f"{name:<18} {kind:<15} {delay:5.2f} s -> status {o.status}: "
                       + ("restored" if o.restored else "; ".join(o.problems)))
                outcomes.append(o)
                done += 1
    _sh("rm", "-rf", str(workdir))
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    lines = ["| command | faults injected | fully restored |", "| --- | --: | --: |"]
    for name in dict.fromkeys(o.command for o in outcomes):
        mine = [o for o in outcomes if o.command == name]
        lines.append(f"| `{name}` | {len(mine)} | {sum(o.restored for o in mine)} |")
    lines.append(f"| **all** | {len(outcomes)} | {sum(o.restored for o in outcomes)} |")
    return "\n".join(lines)
