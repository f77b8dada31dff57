"""What the two govern benchmarks share: a tiny C program compiled at run time into a private
directory, and the daemon started through the CLI with a private state directory.

The C program has three modes (one source, two file names: the rule matches only the
probe's name, so the driver is never governed itself):
- `probe T0 LIMIT_NS`: spins on ioprio_get(2) for its own thread until its IO class is
  idle, and prints the nanoseconds since T0 (CLOCK_MONOTONIC, taken by the driver's child
  just before execve), or -1 after LIMIT_NS;
- `timeline T0 LIMIT_NS`: the same, printing also when main() began, its PID and T0;
- `start T0 X`: prints the nanoseconds since T0 at once (the baseline: exec to main());
- `drive PROBE N GAP_US MODE`: N times fork, take T0, execve PROBE in MODE (probe or
  start); wait; sleep GAP_US;
- `spawn PROGRAM N RATE`: N times vfork+execve PROGRAM (no arguments) and wait, at RATE
  per second on an absolute schedule (0: as fast as possible).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

C_SOURCE = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int probe(long long t0, long long limit, int timeline) {
    long long at_main = now_ns();
    for (;;) {
        long v = syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 0);
        long long t = now_ns();
        if (v >= 0 && (v >> 13) == 3 /* IOPRIO_CLASS_IDLE */) {
            if (timeline)
                printf("%lld %lld %d %lld\n", t - t0, at_main - t0, (int)getpid(), t0);
            else
                printf("%lld\n", t - t0);
            return 0;
        }
        if (t - t0 > limit) {
            printf("-1\n");
            return 0;
        }
    }
}

static int drive(const char *path, int n, int gap_us, const char *mode) {
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0) {
            char t0[32];
            snprintf(t0, sizeof t0, "%lld", now_ns());
            execl(path, path, mode, t0, "1000000000", (char *)0);
            _exit(127);
        }
        int st;
        if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "probe failed\n");
            return 1;
        }
        fflush(stdout);
        if (gap_us) usleep(gap_us);
    }
    return 0;
}

static int spawn(const char *path, long n, double rate) {
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    long step = rate > 0 ? (long)(1e9 / rate) : 0;
    for (long i = 0; i < n; i++) {
        pid_t pid = vfork();
        if (pid < 0) { perror("vfork"); return 1; }
        if (pid == 0) {
            execl(path, path, (char *)0);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        if (step) {
            next.tv_nsec += step;
            while (next.tv_nsec >= 1000000000L) { next.tv_nsec -= 1000000000L; next.tv_sec++; }
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "probe")) return probe(atoll(argv[2]), atoll(argv[3]), 0);
    if (argc == 4 && !strcmp(argv[1], "timeline"))
        return probe(atoll(argv[2]), atoll(argv[3]), 1);
    if (argc == 4 && !strcmp(argv[1], "start")) {  /* the baseline: exec until main() */
        printf("%lld\n", now_ns() - atoll(argv[2]));
        return 0;
    }
    if (argc == 6 && !strcmp(argv[1], "drive"))
        return drive(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5]);
    if (argc == 5 && !strcmp(argv[1], "spawn")) return spawn(argv[2], atol(argv[3]), atof(argv[4]));
    fprintf(stderr, "usage: probe T0 LIMIT | start T0 X | drive PROBE N GAP_US MODE | "
            "spawn PROGRAM N RATE\n");
    return 2;
}
"""


def require_root() -> None:
    if os.geteuid() != 0:
        sys.exit("run this as root: the daemon re-prioritises other processes")


def private_dir() -> Path:
    """A fresh 0700 directory (never a fixed name in /tmp)."""
    return Path(tempfile.mkdtemp(prefix="bb-govern-bench-"))


def compile_tools(where: Path, probe_name: str) -> tuple[Path, Path]:
    """(driver, probe): the same program under two names. Exits 69 without a C compiler."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        print("skipped: no C compiler (gcc/cc) to build the probe", file=sys.stderr)
        sys.exit(69)
    src = where / "probe.c"
    src.write_text(C_SOURCE)
    driver = where / "bbgov-driver"
    subprocess.run([cc, "-O2", "-o", str(driver), str(src)], check=True)
    probe = where / probe_name
    shutil.copy2(driver, probe)
    return driver, probe


def probe_rules(where: Path, probe_name: str, rule_name: str, body: str) -> Path:
    """A rules directory with one rule naming the probe (`body`: what the rule sets)."""
    return rules_dir(where, f'[[rule]]\nname = "{rule_name}"\n'
                            f'match = {{ comm = "{probe_name}" }}\n{body}')


def drive(driver: Path, probe: Path, runs: int, gap_ms: float, mode: str,
          pin: Sequence[str] = ()) -> list[str]:
    """`runs` execs of the probe in `mode`, `gap_ms` apart (the driver's output lines);
    `pin`: a command prefix such as taskset."""
    return subprocess.run([*pin, str(driver), "drive", str(probe), str(runs),
                           str(int(gap_ms * 1000)), mode],
                          capture_output=True, text=True, check=True).stdout.splitlines()


def rules_dir(where: Path, text: str) -> Path:
    """A rules directory the daemon accepts: root's, 0755, with 0644 files."""
    d = where / "rules"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    (d / "bench.toml").write_text(text)
    (d / "bench.toml").chmod(0o644)
    return d


class Daemon:
    """`backburner govern run` as a subprocess, ready once its ready file exists."""

    def __init__(self, where: Path, rules: Path, *extra: str, nice: int | None = None,
                 python: tuple[str, ...] = ("-m", "backburner"),
                 env_extra: dict[str, str] | None = None) -> None:
        self.where = where
        env = dict(os.environ, BACKBURNER_STATE_DIR=str(where / "state"), **(env_extra or {}))
        ready_dir = Path(tempfile.mkdtemp(prefix="ready-", dir=where))  # 0700, new each time
        self.ready = ready_dir / "ready"
        self.log = open(where / "daemon.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, *python, "govern", "run", "--rules", str(rules),
             "--no-defaults", "--ready-file", str(self.ready), "-q", *extra],
            env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while not self.ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit("the daemon did not become ready:\n" + self.output())
            time.sleep(0.01)
        self.pid = self.proc.pid
        if nice is not None:  # as the systemd unit runs it (Nice=)
            os.setpriority(os.PRIO_PROCESS, self.pid, nice)

    def cpu_s(self) -> float:
        """CPU time of the daemon so far, to the nanosecond: the scheduler's own sum of its
        running time (/proc/PID/schedstat; utime + stime are sampled at tick resolution).
        The daemon is one thread, so its leader's figure is all of it."""
        return int(Path(f"/proc/{self.pid}/schedstat").read_text().split()[0]) / 1e9

    def status(self) -> dict:
        """The daemon's status file (what `govern status --json` prints)."""
        return json.loads((self.where / "state" / "govern" / "status.json").read_text())

    def wakeups(self) -> int:
        """Voluntary context switches so far: one per sleep the daemon woke from."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
        return 0

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def output(self) -> str:
        self.log.flush()
        return (self.where / "daemon.log").read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.log.close()
        return code


def percentile(sorted_xs: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_xs:
        return float("nan")
    k = max(0, min(len(sorted_xs) - 1, round(q / 100 * len(sorted_xs) + 0.5) - 1))
    return sorted_xs[k]
