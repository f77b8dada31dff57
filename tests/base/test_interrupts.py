"""Signals as exceptions, held back while a child is being started: a real SIGTERM (or ^C)
sent at the worst moment, right after fork and before the child is registered, still
ends with the child stopped by the transaction's undo, not orphaned."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TIMEOUT

DEFERRED = r'''
import os, signal, sys
from backburner.base import interrupts
interrupts.install()
steps = []
try:
    with interrupts.deferred():
        os.kill(os.getpid(), int(sys.argv[1]))
        steps.append("after the signal, inside")
    steps.append("after the block")
except (KeyboardInterrupt, interrupts.Terminated) as why:
    steps.append(type(why).__name__)
print(",".join(steps), interrupts.seen())
'''


@pytest.mark.parametrize(("sig", "raised"), [(2, "KeyboardInterrupt"), (15, "Terminated"),
                                             (1, "Terminated")])
def test_a_signal_inside_deferred_is_raised_when_the_block_ends(sig: int, raised: str) -> None:
    res = subprocess.run([sys.executable, "-c", DEFERRED, str(sig)], capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert res.stdout == f"after the signal, inside,{raised} {sig}\n", res.stderr


MID_LAUNCH = r'''
import os, subprocess, sys
from backburner.base import interrupts
from backburner import spawn, system
interrupts.install()
real = subprocess.Popen

class Popen(real):  # the signal lands right after fork, before launch registers the child
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        print(self.pid, flush=True)
        os.kill(os.getpid(), int(sys.argv[1]))

subprocess.Popen = Popen
try:
    with system.Transaction("test-mid-launch"):
        spawn.launch(["sleep", "60"], new_group=True)
        print("not interrupted", flush=True)
except (KeyboardInterrupt, interrupts.Terminated) as why:
    print(type(why).__name__, flush=True)
'''


@pytest.mark.root
@pytest.mark.parametrize("sig", [2, 15])
def test_a_child_started_as_the_signal_lands_is_stopped(state_dir: Path, sig: int) -> None:
    res = subprocess.run([sys.executable, "-c", MID_LAUNCH, str(sig)], capture_output=True,
                         text=True, timeout=TIMEOUT,
                         env={**os.environ, "BACKBURNER_STATE_DIR": str(state_dir)})
    pid, outcome = res.stdout.split()
    assert outcome == ("KeyboardInterrupt" if sig == 2 else "Terminated"), res.stderr
    assert not Path(f"/proc/{pid}").exists(), f"sleep {pid} outlived its transaction"


def test_a_forked_child_gets_the_default_actions_back() -> None:
    """In the child before exec a deferred signal would be swallowed: the handlers are
    reset there (a SIGTERM kills it, as after exec)."""
    code = r'''
import os, signal
from backburner.base import interrupts
interrupts.install()
with interrupts.deferred():
    pid = os.fork()
    if pid == 0:
        interrupts.reset_in_child()
        os.kill(os.getpid(), signal.SIGTERM)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
print(os.WIFSIGNALED(status) and os.WTERMSIG(status))
'''
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert res.stdout == "15\n", res.stderr


AFTER_SUCCESS = r'''
import os, signal, sys, time
from backburner import cli
status = cli.main(["policies"])
os.kill(os.getpid(), signal.SIGTERM)  # as if it landed while the interpreter shuts down
time.sleep(0.2)
print("exiting with", status, flush=True)
sys.exit(status)
'''


def test_a_signal_after_the_outcome_is_decided_does_not_change_it() -> None:
    """A command that succeeded exits 0 even when SIGTERM lands on its way out (it died
    "terminated" after `slowdisk create` had set up and announced its device)."""
    r = subprocess.run([sys.executable, "-c", AFTER_SUCCESS], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert "exiting with 0" in r.stdout


INTERRUPTED_LOADING = r'''
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "backburner.cli":
            raise KeyboardInterrupt
sys.meta_path.insert(0, Interrupt())
from backburner import entry
sys.exit(entry.main(["policies"]))
'''


def test_a_ctrl_c_while_the_program_loads_is_one_line_and_130() -> None:
    r = subprocess.run([sys.executable, "-c", INTERRUPTED_LOADING], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert (r.returncode, r.stderr) == (130, "backburner: interrupted\n")


def test_the_cli_called_in_a_process_that_goes_on_leaves_its_signals_alone() -> None:
    """Only the program's own exit holds the terminating signals; a test (or any caller)
    that runs the CLI and goes on must still receive them, as must its children."""
    code = ("import signal; from backburner import cli, system; cli.main(['policies']);"
            "print(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "[]", r.stdout


IN_A_THREAD = r'''
import os, signal, threading, time
from backburner.base import interrupts
interrupts.install()
inside, leave, outcome = threading.Event(), threading.Event(), []

def helper():  # as the network pacer starts `tc` from its thread
    try:
        with interrupts.deferred():
            inside.set()
            leave.wait(10)
        outcome.append("helper finished")
    except BaseException as err:
        outcome.append(f"helper got {type(err).__name__}")

t = threading.Thread(target=helper)
t.start()
inside.wait(10)
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(2)
    print("main thread not interrupted", flush=True)
except interrupts.Terminated:
    print("main thread Terminated", flush=True)
leave.set()
t.join()
print(*outcome)
'''


def test_a_block_deferred_in_another_thread_does_not_take_the_main_threads_signal() -> None:
    """A helper thread inside `deferred()` (the network pacer starting `tc`) when SIGTERM
    came took the signal as its own when its block ended: the thread died, the daemon
    served on, and `govern run` never stopped."""
    r = subprocess.run([sys.executable, "-c", IN_A_THREAD], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.stdout == "main thread Terminated\nhelper finished\n", r.stderr
