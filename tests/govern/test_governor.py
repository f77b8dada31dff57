"""govern/governor.py's Governor in-process, fed real and synthetic events about real
processes: a process gone before it is looked at, forks missed while events were lost (a
rescan adopts them), a thread born with the old priorities, exits retiring journal entries,
and the long-lived journal: compacted, and still undone by `restore` after a SIGKILL."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import bb, wait_for

from backburner import system
from backburner.govern import daemon, governor, rulefile, rules
from backburner.govern.pattern import Pattern
from backburner.kernel import priorities, procfs
from backburner.kernel import proc_events as cn
from backburner.kernel.priorities import IOPrio
from backburner.policy import cgroup_plan, grammar, live

pytestmark = pytest.mark.root

PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    print(os.getpid(), flush=True)
    sys.stdin.readline()
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    print(child.pid, flush=True)
    sys.stdin.readline()
""")


def ruleset(comm: str, extra: str = "") -> rules.Ruleset:
    text = f'[[rule]]\nname = "g"\nmatch = {{ comm = "{comm}" }}\nio = "idle"\ncpu = "idle"\n'
    rs, errors = rulefile.combine([rulefile.parse_file(text + extra, "g.toml")])
    assert not errors
    return rs


@pytest.fixture
def parent(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    # a name of its own: the governor adopts every process of that name on the machine, and
    # this fixture's parent runs in several tests (and other checkouts' suites) at once
    link = tmp_path / f"bbgov-{secrets.token_hex(4)}"
    link.symlink_to(sys.executable)
    proc = subprocess.Popen([str(link), "-c", PARENT], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout
    assert int(proc.stdout.readline()) == proc.pid
    yield proc, link.name
    proc.kill()
    proc.wait()
    proc.stdin.close()  # type: ignore[union-attr]
    proc.stdout.close()


def test_gone_before_looked_at_is_counted(state_dir: Path) -> None:
    gov = governor.Governor(ruleset("zz-nothing"), None)
    proc = subprocess.Popen(["true"])
    proc.wait()
    gov.handle([cn.Event(cn.EXEC, 0, 0, proc.pid, proc.pid)])
    assert gov.counters.gone == 1 and gov.counters.execs == 1 and not gov.governed


def test_rescan_adopts_forks_missed_and_undo_puts_them_back(
        state_dir: Path, parent: tuple[subprocess.Popen[str], str]) -> None:
    proc, comm = parent
    assert proc.stdin and proc.stdout
    with system.LiveTransaction("govern") as tx:
        gov = governor.Governor(ruleset(comm), tx)
        assert gov.consider(proc.pid) is not None
        assert priorities.ioprio_get(proc.pid) == IOPrio("idle")
        proc.stdin.write("fork\n")
        proc.stdin.flush()
        child = int(proc.stdout.readline())
        assert priorities.ioprio_get(child) == IOPrio("idle")  # inherited from its parent
        assert child not in gov.governed  # its fork event was "lost"
        gov.scan()
        record = gov.governed[child]
        assert record.parent == proc.pid and gov.counters.inherited == 1
        kinds = [e.change.kind for e in record.entries]
        assert kinds == ["inherited"]
        # the parent exits: its entries retire; the child keeps its own
        proc.stdin.write("quit\n")
        proc.stdin.flush()
        proc.wait()
        gov.handle([cn.Event(cn.EXIT, 0, 0, proc.pid, proc.pid)])
        assert proc.pid not in gov.governed
        assert [e.change.kind for e in tx.entries] == ["inherited"]
    try:
        assert priorities.ioprio_get(child) == IOPrio("none")
        assert os.sched_getscheduler(child) == os.SCHED_OTHER
    finally:
        os.kill(child, 9)


def test_thread_born_with_old_priorities_is_fixed(
        state_dir: Path, parent: tuple[subprocess.Popen[str], str]) -> None:
    proc, comm = parent
    with system.LiveTransaction("govern") as tx:
        gov = governor.Governor(ruleset(comm), tx)
        gov.consider(proc.pid)
        tid = max(int(t) for t in os.listdir(f"/proc/{proc.pid}/task"))
        priorities.ioprio_set(tid, IOPrio("none"))  # as if cloned while we changed the rest
        gov.handle([cn.Event(cn.FORK, 0, 0, tid, proc.pid, proc.pid, proc.pid)])
        assert priorities.ioprio_get(tid) == IOPrio("idle")
    assert priorities.ioprio_get(tid) == IOPrio("none")


def test_journal_is_compacted_and_a_sigkilled_owner_is_restored(
        state_dir: Path, tmp_path: Path, parent: tuple[subprocess.Popen[str], str]) -> None:
    """A long-lived transaction retires entries of processes that exit and rewrites its
    journal once those outweigh the live ones; `restore` replays the rewritten journal."""
    proc, comm = parent
    script = tmp_path / "owner.py"
    script.write_text(textwrap.dedent(f"""
        import os, subprocess, sys, time
        from backburner import system
        system.LiveTransaction.COMPACT_AFTER = 20
        with system.LiveTransaction("govern") as tx:
            for _ in range(50):  # short-lived processes, governed then retired
                p = subprocess.Popen(["sleep", "30"])
                e = tx.record(system.Priorities(p.pid, "idle", None))
                p.kill(); p.wait()
                tx.retire(e)
            tx.record(system.Priorities({proc.pid}, "idle", "idle"))
            print(tx.journal.path, flush=True)
            time.sleep(300)
    """))
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout
        journal = Path(owner.stdout.readline().strip())
        events = [json.loads(line) for line in journal.read_text().splitlines()]
        intents = [e for e in events if e["event"] == "intent"]
        assert len(events) < 2 * 50, "retired entries were compacted away"
        assert intents[-1]["spec"]["pid"] == proc.pid
        assert priorities.ioprio_get(proc.pid) == IOPrio("idle")
    finally:
        owner.kill()
        owner.wait()
        owner.stdout.close()  # type: ignore[union-attr]
    r = bb("restore")
    assert r.returncode == 0, r.err
    assert priorities.ioprio_get(proc.pid) == IOPrio("none")
    assert os.sched_getscheduler(proc.pid) == os.SCHED_OTHER
    assert not journal.exists()


def test_apply_failure_is_undone_at_once_and_not_kept(state_dir: Path) -> None:
    proc = subprocess.Popen(["sleep", "30"])
    proc.kill()
    proc.wait()
    with system.LiveTransaction("govern") as tx:
        with pytest.raises(Exception, match="no process"):
            tx.record(system.Priorities(proc.pid, "idle", None))
        assert tx.entries == []


def test_missing_controller_other_actions_still_apply_and_status_says_so(
        state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        parent: tuple[subprocess.Popen[str], str]) -> None:
    """A machine without the blkio/io and cpu controllers (the mount table says so): the
    rule's IO class and CPU policy are applied anyway, and the status names the problem."""
    proc, comm = parent
    mounts = tmp_path / "mountinfo"
    mounts.write_text("22 1 0:5 / /proc rw,nosuid shared:1 - proc proc rw\n")
    real = cgroup_plan.plan_cgroup
    monkeypatch.setattr(cgroup_plan, "plan_cgroup",
                        lambda policy, name: real(policy, name, mountinfo=str(mounts)))
    text = f'[[rule]]\nname = "w"\nmatch = {{ comm = "{comm}" }}\npolicy = "background"\n'
    rs, _ = rulefile.combine([rulefile.parse_file(text, "w.toml")])
    with system.LiveTransaction("govern") as tx:
        gov = governor.Governor(rs, tx)
        assert gov.consider(proc.pid) is not None
        assert priorities.ioprio_get(proc.pid) == IOPrio("idle")
        assert os.sched_getscheduler(proc.pid) == os.SCHED_IDLE
        st = daemon.status(gov, daemon.Options(), 0.0)
        (problem,) = st["problems"]
        assert "no cgroup weights" in problem and "blkio" in problem
        assert st["governed"][0]["cgroups"] == []
    assert priorities.ioprio_get(proc.pid) == IOPrio("none")


def test_never_pid1_kernel_threads_itself_or_its_ancestors(state_dir: Path) -> None:
    """Even a rule marked broad that names them all: PID 1, a kernel thread, the daemon and
    the process that started it are left alone."""
    names = {Path(f"/proc/{pid}/comm").read_text().strip()
             for pid in (1, 2, os.getpid(), os.getppid())}
    text = f'[[rule]]\nname = "all"\nmatch = {{ comm = {sorted(names)!r} }}\n'.replace(
        "'", '"') + 'io = "idle"\nbroad = true\n'
    rs, errors = rulefile.combine([rulefile.parse_file(text, "all.toml")])
    assert not errors
    with system.LiveTransaction("govern") as tx:
        gov = governor.Governor(rs, tx)
        for pid in (1, 2, os.getpid(), os.getppid()):  # (no scan: other processes of
            assert gov.consider(pid) is None, pid    # these names are not ours to change)
        assert gov.governed == {} and tx.entries == []


def test_a_new_program_gets_its_io_class_then_the_cpu_back_before_the_tree_walk(
        state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The exec that woke the daemon may have run on the daemon's CPU: the program's own
    thread is changed first, then the daemon yields, and only then walks the tree (work
    beside a program that is loading delays its start: benchmarks/govern_timeline.py)."""
    proc = subprocess.Popen(["sleep", "30"])
    order: list[str] = []
    real_set, real_walk = priorities._ioprio_set_value, live.apply_to_tree
    monkeypatch.setattr(priorities, "_ioprio_set_value",
                        lambda tid, v: (order.append(f"set {tid}"), real_set(tid, v))[1])
    monkeypatch.setattr(os, "sched_yield", lambda: order.append("yield"))
    monkeypatch.setattr(live, "apply_to_tree",
                        lambda pid, policy: (order.append("walk"), real_walk(pid, policy))[1])
    try:
        with system.LiveTransaction("govern") as tx:
            tx.record(system.PrioritiesFirst(proc.pid, "idle", None))
            assert order[:3] == [f"set {proc.pid}", "yield", "walk"]
            assert priorities.ioprio_get(proc.pid) == IOPrio("idle")
        assert priorities.ioprio_get(proc.pid) != IOPrio("idle")  # undone
    finally:
        proc.kill()
        proc.wait()


THREADS = textwrap.dedent("""
    import sys, threading, time
    from backburner.kernel import priorities
    from backburner.policy import cgroup_plan
    from backburner.policy import grammar
    from backburner.policy import live

    def own():
        priorities.ioprio_set(threading.get_native_id(), priorities.IOPrio("be", 7))
        print(threading.get_native_id(), flush=True)
        time.sleep(300)

    def later():
        print(threading.get_native_id(), flush=True)
        time.sleep(300)

    threading.Thread(target=own, daemon=True).start()
    sys.stdin.readline()
    threading.Thread(target=later, daemon=True).start()
    sys.stdin.readline()
""")


@pytest.fixture
def threads() -> Iterator[subprocess.Popen[str]]:
    """A process running THREADS: its first line is the thread with values of its own."""
    proc = subprocess.Popen([sys.executable, "-c", THREADS], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdin and proc.stdout
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()


def _new_thread(proc: subprocess.Popen[str]) -> int:
    assert proc.stdin and proc.stdout
    proc.stdin.write("\n")
    proc.stdin.flush()
    return int(proc.stdout.readline())


def test_a_new_programs_own_thread_first_then_the_rest_journaled_and_put_back(
        state_dir: Path, threads: subprocess.Popen[str]) -> None:
    """The process's own thread is read and changed first; a thread with values of its own
    is journaled by the walk after and gets them back; a thread born after the change
    (which copied the new values) gets what the process had."""
    proc = threads
    assert proc.stdout
    own = int(proc.stdout.readline())
    before = priorities.ioprio_get(proc.pid)
    with system.LiveTransaction("govern") as tx:
        entry = tx.record(system.PrioritiesFirst(proc.pid, "idle", None))
        assert list(entry.old) == [str(proc.pid)]  # read before the change: itself
        assert entry.result["old"][str(own)]["io"] == IOPrio("be", 7).value
        assert priorities.ioprio_get(own) == IOPrio("idle")
        later = _new_thread(proc)
        assert priorities.ioprio_get(later) == IOPrio("idle")  # copied from its creator
    assert priorities.ioprio_get(proc.pid) == before
    assert priorities.ioprio_get(own) == IOPrio("be", 7)
    assert priorities.ioprio_get(later) == before


def test_undo_before_the_rest_was_journaled_puts_back_only_what_shows_the_change(
        state_dir: Path, threads: subprocess.Popen[str]) -> None:
    """A crash after the process's own thread was changed and before the rest of its tree
    was journaled: `restore` puts back that thread and the threads that copied the change,
    and leaves a thread with values of its own alone."""
    proc = threads
    assert proc.stdout
    own = int(proc.stdout.readline())
    before = priorities.ioprio_get(proc.pid)
    change = system.PrioritiesFirst(proc.pid, "idle", None)
    old = change.read()
    priorities.ioprio_set(proc.pid, IOPrio("idle"))  # what apply did before the crash
    later = _new_thread(proc)  # born after: copied idle
    change.undo(old, None)  # `restore` of a journal with no result for the entry
    assert priorities.ioprio_get(proc.pid) == before
    assert priorities.ioprio_get(later) == before
    assert priorities.ioprio_get(own) == IOPrio("be", 7)


def test_a_command_line_too_slow_to_search_is_not_matched_and_is_told(
        state_dir: Path, tmp_path: Path) -> None:
    """A user's process whose command line takes a rule's pattern past its deadline: the
    daemon moves on (no match), counts it, and names the rule once among its problems.
    The pattern is exponential and never finishes: the load check would refuse it, so the
    rule is built here directly (as one that slipped past the check would be)."""
    link = tmp_path / f"bbslow-{secrets.token_hex(4)}"
    link.symlink_to(sys.executable)
    proc = subprocess.Popen([str(link), "-c", "import time; time.sleep(60)", "a" * 60 + "!"])
    try:
        match = rules.Match(comm=(link.name,), cmdline=(Pattern(r"(a|aa)+$"),))
        slow = rules.Rule("slow", match, grammar.parse_policy("background"), file="s.toml",
                          line=1)
        gov = governor.Governor(rules.Ruleset((slow,)), None)
        daemon_opts = daemon.Options(rules_dir=str(tmp_path), dry_run=True)
        wait_for(lambda: "a" * 60 in " ".join(procfs.cmdline_of(proc.pid)),
                 what="the target's command line")
        assert gov.consider(proc.pid) is None and not gov.governed
        st = daemon.status(gov, daemon_opts, 0.0)
        assert st["counters"]["slow_matches"] == 1
        assert st["problems"] == ["rule slow: its cmdline pattern ran past the 10 ms deadline "
                                  "on some command lines, which it then did not match"]
        gov.consider(proc.pid)
        assert daemon.status(gov, daemon_opts, 0.0)["counters"]["slow_matches"] == 2
    finally:
        proc.kill()
        proc.wait()


def test_flush_behind_still_counts_a_governed_writer_shortly_after_its_exit(
        state_dir: Path, parent: tuple[subprocess.Popen[str], str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A short-lived writer's close is read by the flush-behind thread after its exit
    event may have retired it: its PID still counts for FLUSH_GONE_S, for a flush_behind
    rule only."""
    proc, comm = parent
    for extra, flushed in (("flush_behind = true\n", True), ("", False)):
        with system.LiveTransaction("govern") as tx:
            gov = governor.Governor(ruleset(comm, extra), tx)
            gov.consider(proc.pid)
            assert gov.flushes(proc.pid) is flushed
            gov.handle([cn.Event(cn.EXIT, 0, 0, proc.pid, proc.pid)])
            assert proc.pid not in gov.governed and gov.flushes(proc.pid) is flushed
            later = governor.time.monotonic() + governor.FLUSH_GONE_S
            monkeypatch.setattr(governor.time, "monotonic", lambda later=later: later)
            assert not gov.flushes(proc.pid)
            monkeypatch.undo()
