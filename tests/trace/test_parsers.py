"""Tracer output parsers against exact, hand-made tracer text (strace 6.1 and perf 6.1
formats as they print them)."""

from __future__ import annotations

import pytest

from backburner.trace import parsers

STRACE_MAIN = """\
execve("/usr/bin/python3", ["python3", "x.py"], 0x7ffd /* 39 vars */) = 0 <0.000218>
openat(AT_FDCWD, "/nope", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory) <0.000039>
openat(AT_FDCWD, "/etc/passwd", O_RDONLY) = 3 <0.000010>
write(1, "a = b\\n", 6)                  = 6 <0.000020>
rmdir("/x")                             = -1 ENOENT (No such file or directory) <0.000005>
rmdir("/")                              = -1 EBUSY (Device or resource busy) <0.000005>
clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, \
child_tid=0x7f5c, parent_tid=0x7f5c, exit_signal=0, stack=0x7f5c, stack_size=0x7fff80, \
tls=0x7f5c} => {parent_tid=[102]}, 88) = 102 <0.000261>
vfork()                                 = 103 <0.001920>
wait4(-1, 0x7ffd, WNOHANG, NULL)        = -1 ECHILD (No child processes) <0.000034>
futex(0x7f, FUTEX_WAIT_BITSET_PRIVATE, 0, NULL, FUTEX_BITSET_MATCH_ANY <unfinished ...>
<... futex resumed>)                    = 0 <0.250000>
read(3, 0x7f, 10)                       = ? ERESTARTSYS (To be restarted if SA_RESTART is set) <0.1>
--- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED} ---
exit_group(0)                           = ?
+++ exited with 0 +++
"""


def test_strace_counts_calls_errors_errnos_and_times() -> None:
    t = parsers.parse_strace(101, STRACE_MAIN.splitlines())
    s = t.syscalls
    assert s["openat"].calls == 2 and s["openat"].errors == 1
    assert s["openat"].errnos == {"ENOENT": 1}
    assert s["rmdir"].errnos == {"ENOENT": 1, "EBUSY": 1} and s["rmdir"].errors == 2
    assert s["write"].calls == 1 and s["write"].errors == 0  # " = " inside the string
    assert s["futex"].calls == 1 and s["futex"].time_s == pytest.approx(0.25)
    assert s["read"].errnos == {"ERESTARTSYS": 1}
    assert s["exit_group"].calls == 1 and s["exit_group"].time_s == 0
    assert s["wait4"].errnos == {"ECHILD": 1}
    assert s["openat"].time_s == pytest.approx(0.000049)
    assert sum(x.calls for x in s.values()) == 12
    assert t.spawned == [(102, True), (103, False)]
    assert t.comm == "python3"


def test_strace_after_exec_drops_the_launchers_tail() -> None:
    lines = ["rt_sigprocmask(SIG_SETMASK, [], NULL, 8) = 0 <0.000003>",
             'execve("/usr/local/bin/true", ["true"], 0x1 /* 1 var */) = -1 ENOENT (No such '
             "file or directory) <0.000010>",
             'execve("/usr/bin/true", ["true"], 0x1 /* 1 var */) = 0 <0.000100>',
             "brk(NULL) = 0x55 <0.000002>"]
    t = parsers.parse_strace(7, lines, after_exec=True)
    assert set(t.syscalls) == {"execve", "brk"}
    assert t.syscalls["execve"].calls == 1 and t.syscalls["execve"].errors == 0
    assert t.comm == "true"
    assert parsers.parse_strace(7, lines).syscalls["execve"].calls == 2


def test_processes_from_clone_edges() -> None:
    threads = {
        1: parsers.TracedThread(1, comm="shim", spawned=[(2, False)]),
        2: parsers.TracedThread(2, comm="job", spawned=[(3, True), (4, False)]),
        3: parsers.TracedThread(3, spawned=[(5, True)]),
        4: parsers.TracedThread(4, spawned=[(6, True)]),
        5: parsers.TracedThread(5),
        6: parsers.TracedThread(6, comm="grandchild"),
    }
    parsers.assign_processes(threads, [1, 2])
    assert {t: threads[t].pid for t in threads} == {1: 1, 2: 2, 3: 2, 4: 4, 5: 2, 6: 4}
    assert threads[5].comm == "job"  # never exec'd: its creator's name
    assert threads[4].comm == "job" and threads[6].comm == "grandchild"


PERF_SUMMARY = """
 Summary of events:

 python3.11 (16291), 22604 events, 91.0%

   syscall            calls  errors  total       min       avg       max       stddev
                                     (msec)    (msec)    (msec)    (msec)        (%)
   --------------- --------  ------ -------- --------- --------- ---------     ------
   getppid           100000      0    74.115     0.001     0.001     0.187      0.31%
   newfstatat           431     48     0.892     0.001     0.002     0.042      4.88%
\t\t\t\tENOENT: 48
   openat               111     22     0.396     0.002     0.004     0.009      2.96%
\t\t\t\tENOENT: 20
\t\t\t\tEACCES: 2


 my thread (16293), 2034 events, 8.2%

   syscall            calls  errors  total       min       avg       max       stddev
                                     (msec)    (msec)    (msec)    (msec)        (%)
   --------------- --------  ------ -------- --------- --------- ---------     ------
   sched_yield         1000      0     1.500     0.001     0.002     0.010      1.00%
"""

PERF_TASKS = """\
    0 PERF_RECORD_COMM: perf-exec:16290/16290
16290 PERF_RECORD_COMM exec: python3:16290/16290
16290 PERF_RECORD_FORK(16291:16291):(16290:16290)
16291 PERF_RECORD_COMM exec: python3.11:16291/16291
16291 PERF_RECORD_FORK(16291:16293):(16291:16291)
16293 PERF_RECORD_EXIT(16291:16293):(16290:16290)
16291 PERF_RECORD_EXIT(16291:16291):(16290:16290)
"""


def test_perf_summary_per_thread() -> None:
    threads = parsers.parse_perf_summary(PERF_SUMMARY)
    assert set(threads) == {16291, 16293}
    main = threads[16291].syscalls
    assert main["getppid"].calls == 100000 and main["getppid"].time_s == pytest.approx(0.074115)
    assert main["newfstatat"].errnos == {"ENOENT": 48}
    assert main["openat"].errnos == {"ENOENT": 20, "EACCES": 2} and main["openat"].errors == 22
    assert threads[16293].comm == "my thread"
    assert threads[16293].syscalls["sched_yield"].calls == 1000


def test_perf_tasks_give_processes_and_comms() -> None:
    threads = parsers.parse_perf_summary(PERF_SUMMARY)
    tasks = parsers.parse_perf_tasks(PERF_TASKS)
    assert tasks.process_of[16293] == 16291 and tasks.parent[16291] == 16290
    parsers.apply_perf_tasks(threads, tasks)
    assert threads[16293].pid == 16291 and threads[16291].pid == 16291
    assert threads[16291].comm == "python3.11"


def test_perf_lost_events() -> None:
    text = PERF_TASKS + "      dd 17131 [000]  3014.743514: PERF_RECORD_LOST lost 8701\n" \
        "      dd 17131 [001]  3014.9: PERF_RECORD_LOST_SAMPLES lost 12\n"
    assert parsers.perf_lost_events(text) == 8713
    assert parsers.perf_lost_events(PERF_TASKS) == 0
