"""Rules too broad to take without `broad = true`: a rule is held against probes, plain
facts of PID 1, of interactive shells and of a process nobody would name, and one that
matches any of them would govern (nearly) everything. PURE, like `rules`."""

from __future__ import annotations

from dataclasses import replace

from .rules import Facts, Rule, RuleError, Ruleset, StaticFacts

_INIT = (("systemd", "/usr/lib/systemd/systemd"),)
_TERMINAL = (("gnome-terminal-", "/usr/libexec/gnome-terminal-server"),
             ("systemd", "/usr/lib/systemd/systemd"), *_INIT)
_SSH = (("sshd", "/usr/sbin/sshd"), *_INIT)
SHELLS = ("bash", "zsh", "fish", "dash", "sh", "ksh", "mksh", "tcsh", "csh", "nu")


def _shell_probes() -> list[StaticFacts]:
    out = []
    for sh in SHELLS:
        for user, uid, ancestors, unit, login in (
                ("alice", 1000, _TERMINAL, "vte-spawn-0b1c.scope", False),
                ("root", 0, _SSH, "session-1.scope", True)):
            slice_ = f"/user.slice/user-{uid}.slice"
            out.append(StaticFacts(
                pid=4243, comm=sh, exe=f"/usr/bin/{sh}", cmdline=[f"-{sh}" if login else sh],
                ancestors=list(ancestors), unit=unit, cgroup=f"{slice_}/{unit}", user=user,
                uid=uid))
    return out


PID1_PROBES = [
    StaticFacts(pid=1, comm="systemd", exe="/usr/lib/systemd/systemd",
                cmdline=["/sbin/init", "splash"], unit="init.scope", cgroup="/init.scope",
                user="root", uid=0),
    StaticFacts(pid=1, comm="init", exe="/sbin/init", cmdline=["/sbin/init"], unit="",
                cgroup="/", user="root", uid=0),
]
#: A process nobody would name in a rule: matching it means matching (nearly) everything.
ANY_PROBE = StaticFacts(pid=4244, comm="q7zx-anything", exe="/opt/q7zx/bin/q7zx-anything",
                        cmdline=["/opt/q7zx/bin/q7zx-anything", "--q7zx"],
                        ancestors=[("q7zx-parent", "/opt/q7zx/bin/q7zx-parent"), *_INIT],
                        unit="q7zx.service", cgroup="/system.slice/q7zx.service",
                        user="q7zx", uid=4242)


def _probes(pid1: Facts | None) -> list[tuple[str, list[Facts]]]:
    """Each reason with its probes, in the order the reasons are given."""
    return [("PID 1", [*PID1_PROBES, *([pid1] if pid1 else [])]),
            ("shell", list(_shell_probes())), ("any", _any_probes(pid1))]


def _reason(kind: str, probe: Facts) -> str:
    if kind == "PID 1":
        return "it would match PID 1"
    if kind == "shell":
        return f"it would match an interactive shell ({probe.comm} of {probe.user})"
    return "it would match any process"


def broad_reasons(rule: Rule, pid1: Facts | None = None) -> list[str]:
    """Why a rule is too broad to take without `broad = true`: it would match PID 1 (every
    process inherits from it), an interactive shell (everything typed in it), or a process
    nobody would name (so nearly every process)."""
    reasons = []
    for kind, probes in _probes(pid1):
        probe = next((p for p in probes if rule.holds(p)), None)
        if probe is not None:
            reasons.append(_reason(kind, probe))
    return reasons


def _any_probes(pid1: Facts | None) -> list[Facts]:
    """ANY_PROBE, and the same process descending from this machine's own PID 1 (whatever
    it is called: `parent = "<PID 1's name>"` holds for every process there)."""
    if pid1 is None or not (pid1.comm or pid1.exe):
        return [ANY_PROBE]
    return [ANY_PROBE, replace(ANY_PROBE, ancestors=[ANY_PROBE.ancestors[0],
                                                      (pid1.comm, pid1.exe)])]


def broad_errors(ruleset: Ruleset, pid1: Facts | None = None) -> list[RuleError]:
    """`broad_reasons` of every rule not marked broad, in rule order. Each probe is held
    only against the rules the index gives for its name (`Ruleset.candidates`): a set of
    rules that each name their programs costs a few lookups, not rules x probes."""
    found: dict[int, dict[str, str]] = {}  # rule's position -> kind -> reason
    at = {id(rule): i for i, rule in enumerate(ruleset.rules)}
    for kind, probes in _probes(pid1):
        for probe in probes:
            for rule in ruleset.candidates(probe.comm):
                reasons = found.setdefault(at[id(rule)], {})
                if not rule.broad and kind not in reasons and rule.holds(probe):
                    reasons[kind] = _reason(kind, probe)
    out = []
    for i in sorted(i for i, reasons in found.items() if reasons):
        rule = ruleset.rules[i]
        out.append(RuleError(rule.file, rule.line, f"rule {rule.name!r} is too broad: "
                             f"{'; '.join(found[i].values())} (add broad = true if you "
                             "mean it)"))
    return out
