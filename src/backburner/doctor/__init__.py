"""`backburner doctor`: what this machine can do, and why not.

`facts.read()` looks at the machine, changing nothing (it reads sysfs, procfs and mount
tables, looks tools up on PATH, asks importlib whether a module could be imported, runs
`perf stat -e instructions true`, and connects to systemd's D-Bus API or a configured
PostgreSQL server only to see that they answer); `checks.evaluate()` turns those facts into
one line per capability, pure, so every verdict is tested with made-up machines.
"""

from .checks import MAIN_JOB, Check, Report, evaluate, render_json, render_text
from .facts import Facts, read

__all__ = ["MAIN_JOB", "Check", "Facts", "Report", "evaluate", "read", "render_json",
           "render_text"]
