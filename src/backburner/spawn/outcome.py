"""How a child ended: its raw wait status decoded, and the rusage that wait4(2) gave for it
alone (not RUSAGE_CHILDREN, which mixes every child reaped so far)."""

from __future__ import annotations

import os
import resource
import signal
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Outcome:
    """How a child ended, and what it alone consumed (rusage from wait4, not RUSAGE_CHILDREN)."""

    pid: int
    status: int  # raw wait status, as waitpid returned it
    exit_code: int | None
    signal: int | None
    core_dumped: bool
    wall_s: float
    user_s: float
    sys_s: float
    max_rss_kb: int
    in_blocks: int
    out_blocks: int
    started_at: float  # wall-clock epoch seconds, for the record
    # Linux keeps the pre-exec high-water mark in ru_maxrss, and a forked child starts with
    # its parent's RSS: max_rss_kb is only the job's own peak when it exceeds this value.
    launcher_rss_kb: int = 0
    # The rest of wait4's rusage, for `trace` (defaults keep older callers working).
    minflt: int = 0
    majflt: int = 0
    nvcsw: int = 0  # voluntary context switches: the job blocked
    nivcsw: int = 0  # involuntary: the job was preempted while it could have run

    @property
    def max_rss_is_own(self) -> bool:
        return self.max_rss_kb > self.launcher_rss_kb

    @property
    def shell_status(self) -> int:
        """What a shell's $? shows: the exit code, or 128+N for a signal."""
        return self.exit_code if self.exit_code is not None else 128 + (self.signal or 0)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def describe(self) -> str:
        if self.signal is not None:
            name = signal.Signals(self.signal).name if self.signal in _SIGNUMS else self.signal
            core = " (core dumped)" if self.core_dumped else ""
            return f"killed by {name}{core}"
        return f"exited with status {self.exit_code}"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


_SIGNUMS = {s.value for s in signal.Signals}


def decode(pid: int, status: int, ru: resource.struct_rusage, started_ns: int, ended_ns: int,
           started_at: float, launcher_rss_kb: int = 0) -> Outcome:
    signaled = os.WIFSIGNALED(status)
    return Outcome(
        pid=pid,
        status=status,
        exit_code=os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        signal=os.WTERMSIG(status) if signaled else None,
        core_dumped=signaled and os.WCOREDUMP(status),
        wall_s=(ended_ns - started_ns) / 1e9,
        user_s=ru.ru_utime,
        sys_s=ru.ru_stime,
        max_rss_kb=ru.ru_maxrss,
        in_blocks=ru.ru_inblock,
        out_blocks=ru.ru_oublock,
        started_at=started_at,
        launcher_rss_kb=launcher_rss_kb,
        minflt=ru.ru_minflt,
        majflt=ru.ru_majflt,
        nvcsw=ru.ru_nvcsw,
        nivcsw=ru.ru_nivcsw,
    )

