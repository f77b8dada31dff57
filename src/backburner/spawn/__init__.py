"""The only place that creates, signals and reaps processes.

Priorities are applied in the child before exec; the parent waits with wait4(2) so every
job's own rusage comes back with its raw wait status (`Outcome`). `run_foreground` adds
what `backburner run` needs on top: signal forwarding and an exact mirror of the job's end.
"""

from .child import Child, Forked, launched, signal_process, stop_all, terminate
from .fork import fork_call
from .launch import SHARED_TMP, TMP_UPPER, helper_env, launch, prepare_private_tmp, python_module
from .outcome import Outcome, decode
from .run import (
    FORWARDED_SIGNALS,
    SI_KERNEL,
    ToolResult,
    die_like,
    kill_adopted,
    run_foreground,
    run_helper,
    run_tool,
)

__all__ = ["FORWARDED_SIGNALS", "SHARED_TMP", "SI_KERNEL", "TMP_UPPER", "Child", "Forked",
           "Outcome", "ToolResult", "decode", "die_like", "fork_call", "helper_env", "kill_adopted",
           "launch",
           "launched", "prepare_private_tmp", "python_module", "run_foreground", "run_helper",
           "run_tool", "signal_process", "stop_all", "terminate"]
