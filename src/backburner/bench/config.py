"""What a bench run is: its configuration (a named preset's: `presets`), and the one `plan()`
that turns the configuration into typed parts, validated before anything on the machine is touched.

`BenchConfig` is what the user asked for, as plain values: it is stored with the run (JSON)
so that `--resume` rebuilds exactly the same run. `plan()` parses every string once — the
probes, loads, policies, the device, the scheduler names (checked against the kernel's known
IO schedulers) — and checks every number is finite and in range, so that a typo costs no
root setup: the runner consumes only the `Plan`.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from dataclasses import MISSING, asdict, dataclass, field, fields
from types import UnionType
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin, get_type_hints

from .. import systemd
from ..base.errors import CommandNotFound, DataError, NotFoundError, UnavailableError, UsageError
from ..base.quantities import MAX_DURATION_S
from ..kernel import block, cgroups
from ..net import link as netlink
from ..policy import cgroup_plan, grammar
from ..policy import throttle as throttle_text
from ..store.cell import Cell
from . import display, matrix, netplan, pkgloads, policy_texts, presets
from . import loads as loadspec
from .commands import Prepare, shlex_split, split_probe
from .devices import DeviceSpec
from .names import LOAD_LIFETIMES, PROBE_LAYOUTS
from .probes import Probe
from .room import check_room

if TYPE_CHECKING:  # the statistics (numpy) only when a run needs them: `run` loads this
    from ..stats import Rule

MAX_TRIALS = 10_000
MAX_TIMEOUT_S = 24 * 3600.0
MAX_SETTLE_S = 3600.0
MAX_ABORT_FACTOR = 1e6
#: A sequential run's defaults: the fewest trials for which a distribution-free interval of
#: a median exists at 95%, and a ceiling that bounds the run's length.
DEFAULT_MIN_RUNS = 6
DEFAULT_MAX_RUNS = 100
#: fio jobs of one load: more would measure the harness, not the device (and can exhaust
#: memory with 256 MiB files each).
MAX_FIO_JOBS = 64


@dataclass
class BenchConfig:
    """Everything that defines a run; stored as JSON so --resume can rebuild it exactly."""

    probes: list[str]
    loads: list[str]
    policies: list[str]
    schedulers: list[str]
    device: str = "testbed:4G"
    trials: int = 10
    cold: bool = True
    seed: int = 0
    settle_s: float = 2.0
    timeout_s: float = 60.0
    abort_factor: float = 30.0
    abort_after: int = 2
    rotational: int = 1
    ready_line: str | None = None
    ready_file: str | None = None
    ready_window: str | None = None  # --ready window[:TITLE-REGEX]
    preset: str | None = None
    warmup: int = 1
    #: setup variants, a matrix dimension (`--setup-variant`): "before:NAME=COMMAND" runs
    #: after the cache drop and before the probe; "during:NAME=COMMAND" starts with the
    #: probe (as at boot)
    prepares: list[str] = field(default_factory=list)
    #: hyperfine's --prepare: a command run before every trial, un-timed (one for every
    #: probe, or one per probe in their order)
    prepare_commands: list[str] = field(default_factory=list)
    #: what the --prepare and --setup-variant commands run in: a shell command line
    #: (`SHELL -c COMMAND`), or "none" (-N): split into words and run directly
    shell: str = "sh"
    load_lifetime: str = "trial"  # trial | cell
    block: int = 4  # consecutive trials of a cell that share one run of the load ("cell")
    probe_layout: str = "touched"  # touched | directories | aged
    probe_root: str | None = None
    trace: bool = False  # per-trial kernel counters and who issued the device's IO
    ignore_failure: bool = False
    #: until decided (`stats.stopping`): any of these makes the run sequential, and then
    #: `trials` is not used -- each cell runs until its verdict is decided, at least
    #: min_runs and at most max_runs trials, all of them within max_time_s of trials
    min_runs: int | None = None
    max_runs: int | None = None
    max_time_s: float | None = None
    #: the band 1 +/- tolerance a run's verdicts are judged against, given by hand; None:
    #: the band a person notices for the cell's unloaded start (`stats.band`)
    tolerance: float | None = None
    #: a network study over the testbed's slow link, RATE:DELAY[:BUFFER] (`netplan`)
    net_link: str | None = None

    @property
    def sequential(self) -> bool:
        """Whether cells run until decided (else a fixed `trials` each)."""
        return any(v is not None for v in (self.min_runs, self.max_runs, self.max_time_s))

    @property
    def rounds(self) -> int:
        """Counted rounds in the trial order: the most any cell may get."""
        return self.stopping_rule().max_runs if self.sequential else self.trials

    def stopping_rule(self) -> Rule:
        """The rule of a sequential run, its defaults filled in."""
        from ..stats import Rule
        high = self.max_runs if self.max_runs is not None \
            else max(self.min_runs or 0, DEFAULT_MAX_RUNS)
        low = self.min_runs if self.min_runs is not None else min(DEFAULT_MIN_RUNS, high)
        return Rule(low, high, self.tolerance)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "the configuration") -> BenchConfig:
        """A stored configuration (older runs stored one `probe` string)."""
        data = dict(data)
        if "probe" in data and "probes" not in data:
            data["probes"] = [data.pop("probe")]
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DataError(f"{where} has keys this backburner does not know: "
                            f"{', '.join(unknown)}", "it was written by a newer version")
        missing = [f.name for f in fields(cls) if f.name not in data
                   and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise DataError(f"{where} is incomplete: it has no {', '.join(missing)}")
        hints = get_type_hints(cls)
        for name, value in data.items():
            if not _conforms(value, hints[name]):
                raise DataError(f"{where} is damaged: {name} is {_shown(value)}, not "
                                f"{_type_name(hints[name])}")
        return cls(**data)


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a JSON value is of a field's declared type (bool is no int, an int may stand
    for a float): a stored configuration is data from a file, not trusted."""
    origin = get_origin(hint)
    if origin in (Union, UnionType):
        return any(_conforms(value, h) for h in get_args(hint))
    if origin is list:
        (item,) = get_args(hint)
        return isinstance(value, list) and all(_conforms(v, item) for v in value)
    if hint is type(None):
        return value is None
    if hint in (int, float) and isinstance(value, bool):
        return False
    if hint is float:
        return isinstance(value, int | float)
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("NoneType", "None")


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


OPTION_FIELDS = tuple(f.name for f in fields(BenchConfig) if f.name != "preset")
MAX_WARMUP = 100


# --- presets ------------------------------------------------------------------------------


def preset(name: str) -> BenchConfig:
    """The configuration of a named preset (`presets`), before the options override it."""
    try:
        values = presets.PRESETS[name]()
    except KeyError:
        raise UsageError(f"unknown preset {name!r}",
                         f"presets: {', '.join(presets.PRESETS)}") from None
    return BenchConfig(**values)


# --- options -> configuration ---------------------------------------------------------------


def from_options(*, preset_name: str | None = None, seed: int | None = None,
                 **options: Any) -> BenchConfig:
    """The configuration of a new run from command-line options (None: not given).

    A preset supplies defaults that the options override; without one, a probe is needed.
    Given loads always get the unloaded baseline "none" added (every loaded cell needs it).
    Without a seed one is drawn at random (it is recorded with the run).
    """
    import secrets

    unknown = set(options) - set(OPTION_FIELDS)
    if unknown:
        raise TypeError(f"unknown bench options {sorted(unknown)}")
    if preset_name:
        cfg = preset(preset_name)
    elif options.get("net_link") is not None:
        cfg = BenchConfig(**netplan.defaults())
    else:
        if not options.get("probes"):
            raise UsageError("bench needs --probe COMMAND, --preset NAME or --net-link LINK")
        cfg = BenchConfig(probes=[], loads=["none"], policies=["default"],
                          schedulers=["mq-deadline", "bfq"])
    if cfg.net_link is not None or options.get("net_link") is not None:
        netplan.check_options(options, preset_name if cfg.net_link is None else None)
    _choose_stopping(cfg, options)
    for key, value in options.items():
        if value is not None:
            setattr(cfg, key, list(value) if isinstance(value, list | tuple) else value)
    if options.get("loads") is not None and "none" not in cfg.loads:
        cfg.loads.insert(0, "none")
    if cfg.net_link is not None:  # the link is the network study's device
        cfg.device = netplan.device_label(netlink.parse(cfg.net_link))
    cfg.seed = seed if seed is not None else secrets.randbelow(2**31)
    return cfg


SEQUENTIAL_OPTIONS = {"min_runs": "--min-runs", "max_runs": "--max-runs",
                      "max_time_s": "--max-time"}


def _choose_stopping(cfg: BenchConfig, options: dict[str, Any]) -> None:
    """A fixed --trials count and the until-decided budget exclude each other: a fixed
    count given replaces a preset's budget; both given is refused."""
    budget = [flag for key, flag in SEQUENTIAL_OPTIONS.items() if options.get(key) is not None]
    if options.get("trials") is None:
        return
    if budget:
        raise UsageError(f"--trials fixes the number of trials; {', '.join(budget)} run "
                         "each cell until it is decided", "give one or the other")
    cfg.min_runs = cfg.max_runs = cfg.max_time_s = None


# --- the plan -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A validated configuration: typed parts the runner uses, nothing left to parse."""

    config: BenchConfig
    probes: dict[str, Probe]  # label -> probe (program resolved to an absolute path)
    prepares: dict[str, Prepare | None]  # name -> step; "none" -> None
    loads: dict[str, loadspec.LoadSpec]
    policies: dict[str, grammar.Policy]
    schedulers: tuple[str, ...]
    device: DeviceSpec
    cells: tuple[Cell, ...] = field(default=())
    #: probe label -> the --prepare command run before each of its trials
    trial_prepares: dict[str, str] = field(default_factory=dict)
    #: policy text -> the throttle its load runs under (`throttled`)
    throttles: dict[str, throttle_text.Spec] = field(default_factory=dict)
    #: the policy texts whose load's files are written back at its class (`run.flushing`)
    flush_behind: frozenset[str] = frozenset()

    @property
    def needs_fio(self) -> bool:
        return any(spec.kind in ("fio", "copy") for spec in self.loads.values())

    def slots(self) -> list[matrix.Slot]:
        return matrix.plan_order(list(self.cells), self.config)


def check_group_controls(policies: list[grammar.Policy],
                         facts: systemd.Facts | None = None, root: str | None = None) -> None:
    """cgroup v2's group knobs (io.prio.class, io.latency, io.cost): one line naming the
    file this machine lacks; and they are applied only in a scope systemd delegates to
    bench, so a machine whose tree systemd does not own is refused too."""
    wanted = [p for p in policies if p.group_controls]
    if not wanted:
        return
    root = root if root is not None else cgroups.unified_root()
    for pol in wanted:
        if why := cgroup_plan.missing(pol, root):
            raise UnavailableError(why, "use a policy without group-io, io-latency, io-cost")
    if not systemd.manages_cgroups(facts if facts is not None else systemd.read_facts()):
        raise UnavailableError(
            f"policy {wanted[0].spec()}: bench applies cgroup v2's group knobs in a scope "
            "systemd delegates to it, and systemd does not own this machine's cgroup tree",
            "run the study on a machine booted with systemd")


def plan(cfg: BenchConfig, *, resolve: bool = True) -> Plan | netplan.NetPlan:
    """Check everything that can be checked without root or a device; UsageError otherwise.
    A network study (`net_link`) gets its own plan (`netplan`).

    ``resolve=False`` leaves the probes' programs unresolved and the tools unchecked: enough
    to know a stored run's cells and slots (a complete `--resume` builds nothing)."""
    _check_numbers(cfg)
    if cfg.net_link is not None:
        return netplan.plan(cfg, [split_probe(t) for t in cfg.probes])
    netplan.refuse_without_link([split_probe(t) for t in cfg.probes], cfg.loads)
    probes = _probes(cfg, resolve)
    loads = {text: loadspec.parse(text) for text in dict.fromkeys(cfg.loads)}
    for spec in loads.values():
        jobs = sum(part.jobs for part in spec.fio)
        if jobs > MAX_FIO_JOBS:
            raise UsageError(f"load {spec.text!r} asks for {jobs} fio jobs",
                             f"at most {MAX_FIO_JOBS}")
    if not loads:
        raise UsageError("no load given")
    policies, throttles, flushes = policy_texts.parse(cfg.policies)
    if not policies:
        raise UsageError("no policy given")
    if resolve:
        check_group_controls(list(policies.values()))
        if throttles:
            from . import throttled  # here: govern's throttle (and regex) only when asked

            throttled.require()
        if flushes:
            from ..run import flushing

            flushing.require()
    schedulers = tuple(dict.fromkeys(block.check_scheduler(s) for s in cfg.schedulers))
    if not schedulers:
        raise UsageError("no scheduler given")
    device = DeviceSpec.parse(cfg.device)
    check_room(device, loadspec.room_needed(loads.values()))
    if resolve and any(s.kind in ("fio", "copy") for s in loads.values()):
        loadspec.require_fio()
    if resolve and cfg.ready_window is not None:
        display.require_tools()
    for kind in dict.fromkeys(s.kind for s in loads.values() if s.shape is not None):
        if resolve:  # before anything is built: one line naming the package to install
            pkgloads.require(kind)
    prepares = _prepares(cfg)
    trial_prepares = _trial_prepares(cfg, list(probes))
    _check_commands(cfg, [*trial_prepares.values(),
                          *(p.command for p in prepares.values() if p and p.runs_command)],
                    resolve)
    _check_choices(cfg)
    if cfg.probe_root is not None and device.kind == "path":
        raise UsageError("--probe-root needs a testbed or slowdisk device: on a directory the "
                         "probe runs from this machine's own files",
                         "use --device testbed:SIZE or slowdisk:PROFILE:SIZE")
    for step in prepares.values():
        if step is not None and step.scheduler is not None and step.scheduler not in schedulers:
            raise UsageError(f"setup variant {step.name} tunes {step.scheduler}, which is not "
                             "among the schedulers of the run",
                             f"add --scheduler {step.scheduler}")
    cells = tuple(matrix.build_cells(list(probes), device.label, list(schedulers), list(loads),
                                     list(policies), list(prepares),
                                     {n: p.scheduler for n, p in prepares.items()
                                      if p is not None and p.scheduler is not None}))
    return Plan(cfg, probes, prepares, loads, policies, schedulers, device, cells,
                trial_prepares, throttles, frozenset(flushes))


def _prepares(cfg: BenchConfig) -> dict[str, Prepare | None]:
    steps = [Prepare.parse(t) for t in cfg.prepares]
    names = [p.name for p in steps]
    if len(set(names)) != len(names):
        raise UsageError("two preparation steps share a name", "name them apart")
    return {"none": None, **{p.name: p for p in steps}}


#: What the matrix form of --prepare looked like (NAME=COMMAND), now --setup-variant.
_NAMED_COMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*=\S")


def _trial_prepares(cfg: BenchConfig, probes: list[str]) -> dict[str, str]:
    """Probe label -> its --prepare command: one command for every probe, or one per probe
    in their order, as hyperfine pairs --prepare with its commands."""
    commands = cfg.prepare_commands
    for command in commands:
        if not command.strip():
            raise UsageError("--prepare COMMAND is empty")
        if _NAMED_COMMAND.match(command):
            raise UsageError(f"--prepare {command!r}: NAME=COMMAND is the matrix form, now "
                             "--setup-variant NAME=COMMAND",
                             "--prepare runs one command before every trial (for a command "
                             "that begins with an assignment: env NAME=VALUE COMMAND)")
    if len(commands) > 1 and len(commands) != len(probes):
        raise UsageError(f"{len(commands)} --prepare commands for {len(probes)} probes",
                         "give one for every probe, or one per --probe in their order")
    if not commands:
        return {}
    return dict(zip(probes, commands * len(probes) if len(commands) == 1 else commands,
                    strict=False))


def _check_commands(cfg: BenchConfig, commands: list[str], resolve: bool) -> None:
    """The shell parses and, when resolving, exists; with -N each command's program."""
    if not shlex_split(cfg.shell):
        raise UsageError("--shell is empty", "give a shell, e.g. sh or 'bash --norc', or none")
    if not commands or not resolve:
        return
    programs = [shlex_split(c)[0] for c in commands] if cfg.shell == "none" \
        else [shlex_split(cfg.shell)[0]]
    for program in programs:
        if shutil.which(program) is None:
            raise CommandNotFound(f"{program!r}: command not found",
                                  "--prepare and --setup-variant commands run on this machine"
                                  + (" without a shell (-N)" if cfg.shell == "none" else ""))


def _check_choices(cfg: BenchConfig) -> None:
    if cfg.load_lifetime not in LOAD_LIFETIMES:
        raise UsageError(f"--load-lifetime {cfg.load_lifetime!r} is not one of "
                         f"{', '.join(LOAD_LIFETIMES)}")
    if cfg.probe_layout not in PROBE_LAYOUTS:
        raise UsageError(f"--probe-layout {cfg.probe_layout!r} is not one of "
                         f"{', '.join(PROBE_LAYOUTS)}")
    if not 0 <= cfg.warmup <= MAX_WARMUP:
        raise UsageError(f"--warmup {cfg.warmup} out of range", f"use 0..{MAX_WARMUP}")
    if not 1 <= cfg.block <= MAX_TRIALS:
        raise UsageError(f"block {cfg.block} out of range", f"use 1..{MAX_TRIALS}")
    if cfg.probe_root is not None:
        root = cfg.probe_root
        if not os.path.exists(root):
            raise NotFoundError(f"--probe-root {root}: no such directory or image")
        if not (os.path.isdir(root) or os.path.isfile(root)):
            raise UsageError(f"--probe-root {root} is neither a directory nor an image file")
        if cfg.probe_layout != "touched":
            raise UsageError("--probe-root is used as it is: it takes no --probe-layout")


def _probes(cfg: BenchConfig, resolve: bool) -> dict[str, Probe]:
    if not cfg.probes:
        raise UsageError("bench needs --probe COMMAND or --preset NAME")
    out: dict[str, Probe] = {}
    for text in cfg.probes:
        label, command = split_probe(text)
        if label in out:
            raise UsageError(f"two probes are labelled {label!r}",
                             "label them apart: --probe NAME='COMMAND'")
        probe = Probe.parse(command, cfg.ready_line, cfg.ready_file, label, cfg.ready_window)
        if cfg.probe_root is not None:  # its program lives in that root, not on this host
            if not os.path.isabs(probe.argv[0]):
                raise UsageError(f"with --probe-root, the probe's program must be an absolute "
                                 f"path inside that root, not {probe.argv[0]!r}")
            out[label] = probe
            continue
        out[label] = probe.resolve() if resolve else probe
    return out


def _check_numbers(cfg: BenchConfig) -> None:
    if not 1 <= cfg.trials <= MAX_TRIALS:
        raise UsageError(f"--trials {cfg.trials} out of range", f"use 1..{MAX_TRIALS}")
    checks = (("--settle", cfg.settle_s, 0.0, MAX_SETTLE_S, False),
              ("--timeout", cfg.timeout_s, 0.0, MAX_TIMEOUT_S, True),
              ("--abort-factor", cfg.abort_factor, 1.0, MAX_ABORT_FACTOR, True))
    for name, value, low, high, low_open in checks:
        ok = isinstance(value, int | float) and math.isfinite(value) and value <= high and (
            value > low if low_open else value >= low)
        if not ok:
            bound = f"{'above' if low_open else 'at least'} {low:g} and at most {high:g}"
            raise UsageError(f"{name} {value} out of range", f"give a finite number {bound}")
    if cfg.rotational not in (0, 1):
        raise UsageError(f"--rotational {cfg.rotational} out of range", "use 0 or 1")
    if not 1 <= cfg.abort_after <= MAX_TRIALS:
        raise UsageError(f"abort_after {cfg.abort_after} out of range")
    _check_stopping(cfg)


def _check_stopping(cfg: BenchConfig) -> None:
    """The until-decided budget: whole numbers of trials in range, min <= max, a time."""
    for flag, value in (("--min-runs", cfg.min_runs), ("--max-runs", cfg.max_runs)):
        if value is not None and not 1 <= value <= MAX_TRIALS:
            raise UsageError(f"{flag} {value} out of range", f"use 1..{MAX_TRIALS}")
    if cfg.min_runs is not None and cfg.max_runs is not None and cfg.min_runs > cfg.max_runs:
        raise UsageError(f"--min-runs {cfg.min_runs} is above --max-runs {cfg.max_runs}")
    if cfg.max_time_s is not None and not (
            math.isfinite(cfg.max_time_s) and 0 < cfg.max_time_s <= MAX_DURATION_S):
        raise UsageError(f"--max-time {cfg.max_time_s:g}s out of range",
                         "give more than 0 and at most 7 days")
    if cfg.tolerance is not None and not (math.isfinite(cfg.tolerance)
                                          and 0 < cfg.tolerance < 1):
        raise UsageError(f"--tolerance {cfg.tolerance:g} out of range",
                         "give a fraction above 0 and below 1, e.g. 0.1 for +/-10%")
