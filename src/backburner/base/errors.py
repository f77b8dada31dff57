"""One exception family: a one-line message for the user and a distinct exit status.

The CLI prints ``str(error)`` and exits with ``error.exit_status``; it never shows a
traceback unless ``--debug`` is given. The statuses follow sysexits.h where one fits, so
scripts can tell "you typed it wrong" from "this machine cannot do it" from "run as root".
"""

from __future__ import annotations


class BackburnerError(Exception):
    """Base class. ``hint`` says what would fix it; it is appended to the message."""

    exit_status = 70  # EX_SOFTWARE: an internal error we did not classify

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}; {hint}")


class UsageError(BackburnerError):
    """Bad command-line input: an unknown IO class, a load spec that does not parse."""

    exit_status = 64  # EX_USAGE


class DataError(BackburnerError):
    """Input data is not what we need: not a result database, a newer schema, an empty one."""

    exit_status = 65  # EX_DATAERR


class NotFoundError(BackburnerError):
    """A named thing does not exist: a PID, a file, a device."""

    exit_status = 66  # EX_NOINPUT


class UnavailableError(BackburnerError):
    """This machine lacks a capability: a cgroup controller, a scheduler, a tool."""

    exit_status = 69  # EX_UNAVAILABLE


class SystemStateError(BackburnerError):
    """Changing or restoring system state failed (a write to sysfs, a mount, a loop device)."""

    exit_status = 71  # EX_OSERR


class ExistsError(BackburnerError):
    """We refuse to overwrite something (a result database) without being told to."""

    exit_status = 73  # EX_CANTCREAT


class BusyError(BackburnerError):
    """Something is in use by another backburner process (a result database being written)."""

    exit_status = 75  # EX_TEMPFAIL: try again later


class IOFailure(BackburnerError):
    """Reading or writing a file failed (a report, an export): the message names the file."""

    exit_status = 74  # EX_IOERR


class AccessError(BackburnerError):
    """Access was denied by something other than our own uid (a database's credentials)."""

    exit_status = 77  # EX_NOPERM


class NotRootError(BackburnerError):
    """An operation needs root; the message names the operation."""

    exit_status = 77  # EX_NOPERM

    def __init__(self, operation: str) -> None:
        super().__init__(f"{operation} needs root", "run it with sudo or as root")


def denied(operation: str, why: str = "Operation not permitted") -> BackburnerError:
    """What a refusal by the kernel means: `NotRootError` when we are not root, else an
    `AccessError` that says so (a security module, lockdown or a container's limits refuse
    root too; "needs root" would send a root user in circles)."""
    import os

    if os.geteuid() != 0:
        return NotRootError(operation)
    return AccessError(f"{operation}: the kernel refused ({why}) although this runs as root",
                       "a security module (SELinux, AppArmor), kernel lockdown or a "
                       "container's limits may forbid it")


class UnsafePathError(BackburnerError):
    """A path another user could have planted or can change (a state directory, a rule file):
    refused, as sudo refuses a sudoers file writable by others."""

    exit_status = 78  # EX_CONFIG


class StartError(SystemStateError):
    """A process could not be started for a reason other than a missing or non-executable
    program (too many processes, no memory, an argument list too long)."""


class CommandNotFound(BackburnerError):
    """The job's program does not exist (shell convention: 127)."""

    exit_status = 127


class CommandNotExecutable(BackburnerError):
    """The job's program exists but cannot be executed (shell convention: 126)."""

    exit_status = 126


EXIT_STATUSES: dict[str, int] = {
    cls.__name__: cls.exit_status
    for cls in (
        UsageError,
        DataError,
        NotFoundError,
        UnavailableError,
        SystemStateError,
        ExistsError,
        BusyError,
        IOFailure,
        NotRootError,
        AccessError,
        UnsafePathError,
        BackburnerError,
        CommandNotExecutable,
        CommandNotFound,
    )
}
