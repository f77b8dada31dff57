"""`backburner run` in a Debian guest under systemd, from this commit's wheel: the job's end
mirrored exactly (the host's cases, from helpers.py) and the job in the IO class and CPU
policy its policy sets, read back from the kernel by the job itself."""

from __future__ import annotations

import json
import signal

import pytest
from helpers import (
    FORWARDED,
    RUN_EXIT_CODES,
    TRAP_JOB,
    run_shell_statuses,
    run_signal_deaths,
)

from .rig import Guest, GuestResult

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

PY = "python3"  # the guest's Debian Python
POLICY = ["--policy", "background"]
SET = "io=idle cpu=SCHED_IDLE"  # what the background policy gives the job

# The job's first act: say which IO class (ioprio_get, through ionice) and CPU policy it has.
PROBE_SH = 'echo "io=$(ionice -p $$) cpu=$(chrt -p $$ | sed -n "s/.*policy: //p")"'
PROBE_PY = """\
import ctypes, os
_prio = ctypes.CDLL(None, use_errno=True).syscall(252, 1, 0)  # ioprio_get(PROCESS, self)
print("io=%s cpu=%s" % ({0: "none", 1: "realtime", 2: "best-effort", 3: "idle"}[_prio >> 13],
      {0: "SCHED_OTHER", 3: "SCHED_BATCH", 5: "SCHED_IDLE"}[os.sched_getscheduler(0)]),
      flush=True)
"""


def probed(job: list[str]) -> list[str]:
    """The same job, telling its priorities first (a shell job or a `python -c` job)."""
    if job[:2] == ["sh", "-c"]:
        return ["sh", "-c", f"{PROBE_SH}; {job[2]}", *job[3:]]
    assert job[1] == "-c", job
    return [job[0], "-c", PROBE_PY + job[2], *job[3:]]


def bb_run(guest: Guest, job: list[str]) -> GuestResult:
    # -q: the guest's disk runs none, where run warns that the policy's IO class and weight
    # do nothing (test_guest_levers.py); these checks are about the job's status alone
    return guest.run(["backburner", "run", "-q", *POLICY, "--", *job], timeout=60)


@pytest.mark.parametrize("code", RUN_EXIT_CODES)
def test_exit_code_mirrored(guest: Guest, code: int) -> None:
    r = bb_run(guest, probed(["sh", "-c", f"exit {code}"]))
    assert (r.status, r.out.strip(), r.err) == (code, SET, ""), r


@pytest.mark.parametrize("job, sig", run_signal_deaths(PY))
def test_signal_death_mirrored(guest: Guest, job: list[str], sig: int) -> None:
    r = bb_run(guest, probed(job))
    assert r.status == -sig, r  # backburner itself died of the job's signal
    assert r.out.strip() == SET


@pytest.mark.parametrize("job, shown", run_shell_statuses(PY))
def test_shell_sees_128_plus_signal(guest: Guest, job: list[str], shown: int) -> None:
    script = '"$@"; echo "status=$?"'
    r = guest.run(["sh", "-c", script, "sh", "backburner", "run", *POLICY, "--", *probed(job)])
    assert r.out.split("\n")[-2:] == [f"status={shown}", ""], r
    assert r.out.startswith(SET)


def test_exit_139_on_purpose_is_an_exit_not_a_signal(guest: Guest) -> None:
    r = bb_run(guest, probed(["sh", "-c", "exit 139"]))
    assert r.status == 139, r  # an exit (a signal would be -11)
    assert r.out.strip() == SET


def test_command_not_found_127(guest: Guest) -> None:
    r = bb_run(guest, ["no-such-command-bb-test"])
    assert r.status == 127, r
    assert r.err.splitlines() == ["backburner: no-such-command-bb-test: command not found"], r


def test_not_executable_126(guest: Guest) -> None:
    tmp = guest.run(["mktemp", "-d"], check=True).out.strip()
    try:
        guest.put(f"{tmp}/plain-file", "#!/bin/sh\nexit 0\n", mode=0o644)
        for target in (f"{tmp}/plain-file", tmp):  # a file without the x bit; a directory
            r = bb_run(guest, [target])
            assert r.status == 126, r
            assert len(r.err.splitlines()) == 1 and "cannot execute" in r.err, r
    finally:
        guest.run(["rm", "-rf", tmp], check=True)


# backburner run in the guest, a signal sent to it once the job's traps are set; answers
# with backburner's status, the signal the job got and what its probe said
FORWARD_DRIVER = r"""
import json, os, subprocess, sys, tempfile, time
sig, job = int(sys.argv[1]), sys.argv[2]
out = os.path.join(tempfile.mkdtemp(), "got")
proc = subprocess.Popen(["backburner", "run", *sys.argv[3:], "--", sys.executable, "-c", job,
                         out], stdout=subprocess.PIPE)
deadline = time.monotonic() + 60
while not os.path.exists(out + ".ready"):
    if time.monotonic() > deadline or proc.poll() is not None:
        proc.kill()
        sys.exit("the job's traps were never set")
    time.sleep(0.01)
os.kill(proc.pid, sig)
stdout = proc.communicate(timeout=60)[0]
print(json.dumps({"status": proc.returncode, "got": open(out).read(),
                  "probe": stdout.decode().strip()}))
"""


@pytest.mark.parametrize("sig", FORWARDED, ids=lambda s: s.name)
def test_signal_forwarded_to_job(guest: Guest, sig: signal.Signals) -> None:
    job = probed([PY, "-c", TRAP_JOB])[2]
    r = guest.run([PY, "-c", FORWARD_DRIVER, str(int(sig)), job, *POLICY], timeout=120,
                  check=True)
    assert json.loads(r.out) == {"status": 40 + sig, "got": sig.name, "probe": SET}



def test_flush_behind_writes_the_jobs_files_back_from_its_scope(guest: Guest) -> None:
    """Under systemd the job runs in a transient scope: the flush-behind thread stays in
    `run`, tells the job's processes apart (the file's writer, `head`, has ended when its
    close is read) and writes the file back, as `run -v` says."""
    try:
        r = guest.run(["backburner", "run", "-v", "-q", "--policy", "background,flush-behind",
                       "--", "sh", "-c", "head -c 32M /dev/urandom >/var/tmp/bb-flush.bin && "
                       "cat /proc/self/cgroup"], timeout=120)
        assert r.status == 0 and r.out.strip().endswith(".scope"), r  # the job's own group
        said = [ln for ln in r.err.splitlines() if "flush-behind" in ln]
        assert said == ["backburner: flush-behind: 1 file (32 MiB) written back as the job "
                        "closed them"], r
    finally:
        guest.run(["rm", "-f", "/var/tmp/bb-flush.bin"])
