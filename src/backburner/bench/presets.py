"""The named configurations of `bench --preset`: the README's demonstration, the
scenario that started the project, the BFQ authors' start-up benchmark (the S suite's,
so the two tools can be compared on one machine) and downloads on a slow line (a network
study), as plain option values (`config.preset`
makes them a `BenchConfig`, which the command line's options then override).

The office scenario's probe is the most faithful one this machine can run: LibreOffice
Writer's window on a private X server when LibreOffice has a graphical front end and
`--ready window` can watch for it (what a user waits for); LibreOffice's own
`--terminate_after_init` when it is installed without one; else an interpreter importing a
large package tree, named "office-standin" in the results.

The command line's parser offers the presets' names (`PRESETS`), and every command builds
the whole parser: what a preset needs to decide (systemd, cgroups, the X display, the
network study's plan) is imported in its function, not here.
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import sys
from typing import Any

from ..base.errors import UnavailableError

#: A cold start of the Python interpreter running this tool, importing a few stdlib
#: packages: a couple of hundred small files, read through the device under test.
PYTHON_PROBE = shlex.join([os.path.realpath(sys.executable), "-I", "-c",
                           "import json, email.parser, http.client, asyncio"])
#: The title LibreOffice gives a new Writer document's window ("Untitled 1 - LibreOffice
#: Writer"); the start ends when it is mapped.
WRITER_WINDOW = "window:LibreOffice Writer"


def quick() -> dict[str, Any]:
    """The README's demonstration: a few minutes, and the classic result (BFQ and the idle
    IO class protect start-up from sequential readers). Each cell until decided against the
    band a person notices for its 0.1-0.3 s start (±25%), 8 to 60 trials within 3 minutes
    of trials: at the spread of such starts on the development VM (10-20% per trial) a cell
    whose start is not noticeably slower is decided "at most" in about 10 to 30 trials.
    The readers settle 1 s: past BFQ's 0.6 s stable-merge window, within which a start is
    served as part of a reader (benchmarks/settle_sweep.py), and long past their own ramp
    (steady within 0.1 s: benchmarks/load_ramp.py); a loaded trial's settle is most of its
    time, so the shortest sound one buys each cell the most trials within the 3 minutes."""
    return dict(probes=[f"python={PYTHON_PROBE}"], loads=["none", "readers:10:seq"],
                policies=["default", "background"], schedulers=["mq-deadline", "bfq"],
                device="testbed:4G", trials=8, settle_s=1.0, timeout_s=60.0,
                preset="quick", min_runs=8, max_runs=60, max_time_s=180.0)


def office_hdd() -> dict[str, Any]:
    """The scenario that started the project: an office suite's cold start while an app
    store installs and uninstalls an app (flatpak, as a shell loop and as one long-lived
    process) on a simulated 5400 rpm laptop disk, the store unprotected or as `govern`
    ships it for flatpak (the idle IO class, throttled while the start stalls on IO), 7 to
    15 trials a cell, stopping a cell once decided, the trials' time bounded at 25 minutes.
    Not the idle class alone: about one start in eight then comes 1.6-2x slower, while the
    kernel's flusher writes the installer's files at the default class, and a cell with
    such a tail sits on the edge of the band a person notices, which no budget decides
    (docs/measurements/startup.md, "The slow starts traced")."""
    return dict(probes=[office_probe()], ready_window=office_ready(),
                loads=["none", "flatpak-loop", "flatpak-api"],
                policies=["default", "io=idle,throttle"], schedulers=["mq-deadline", "bfq"],
                device="slowdisk:hdd-5400:4G", trials=15, settle_s=2.0, timeout_s=120.0,
                preset="office-hdd", min_runs=7, max_runs=15, max_time_s=25 * 60.0)


def _writer_gui() -> str | None:
    """LibreOffice's launcher when it has a graphical front end (a VCL plug-in: Debian's
    `-nogui` packages have none) and a window can be watched for; else None."""
    office = shutil.which("soffice")
    if office is None:
        return None
    program = os.path.dirname(os.path.realpath(office))
    if not glob.glob(os.path.join(program, "libvclplug_*.so")):
        return None
    from . import display

    try:
        display.require_tools()
    except UnavailableError:
        return None
    return office


def office_probe() -> str:
    if (office := _writer_gui()) is not None:
        return "writer=" + shlex.join([office, "--writer", "--norestore", "--nologo"])
    if (office := shutil.which("soffice")) is not None:
        argv = [office, "--headless", "--norestore", "--terminate_after_init"]
        return f"office={shlex.join(argv)}"
    return standin_probe()


def standin_probe() -> str:
    """The office scenario's stand-in: an interpreter importing a large package tree (a
    few thousand small files), cheaper than Writer's start to screen many cells with."""
    # the packages come from our own environment: named, as the probe's program is
    # resolved to the real interpreter (a venv's python is a link to the system's); -P
    # keeps the working directory off sys.path (a json.py there is not imported as root)
    import sysconfig

    return "office-standin=" + shlex.join([
        "env", f"PYTHONPATH={sysconfig.get_paths()['purelib']}",
        os.path.realpath(sys.executable), "-P", "-c",
        "import matplotlib.pyplot, numpy, email.parser, http.client, asyncio, json"])


def office_ready() -> str | None:
    return WRITER_WINDOW if _writer_gui() is not None else None


#: The probe of the S suite comparison (docs/measurements/startup.md): a cold interpreter importing
#: three stdlib packages; the preset puts every file of their directories on the device.
S_PROBE = shlex.join([os.path.realpath(sys.executable), "-I", "-c",
                      "import json, email, http.client"])


def s_startup() -> dict[str, Any]:
    """The BFQ authors' start-up benchmark (the S suite's comm_startup_lat) as bench runs
    it, so the two can be compared cell by cell: ten sequential readers with S's fio
    settings (`s-suite`: buffered 4 KiB reads, whole-file passes with the cache dropped
    before each), started once per cell and kept through all its trials (S starts them
    once per run), caches dropped before each start while they run, the probe's files all
    on the device. S settles weight-raising time + 4 s; bench settles the larger of the two."""
    return dict(probes=[f"python={S_PROBE}"], loads=["none", "readers:10:seq:s-suite"],
                policies=["default"], schedulers=["mq-deadline", "bfq"],
                device="testbed:4G", trials=8, settle_s=4.0, timeout_s=120.0,
                preset="s-startup", load_lifetime="cell", block=8,
                probe_layout="directories")


def slow_link() -> dict[str, Any]:
    """Downloads on a slow line (a network study, `netplan`): a page fetched and a TCP
    handshake over a 1 Mbit/s link with a modem's deep queue (300 ms), while one and four
    downloads run, unprotected and with the background policy; each cell until decided,
    at most 10 minutes of trials. `--net-link` gives another line (a delay needs netem)."""
    from ..net import link as netlink
    from . import netplan

    spec = "1mbit:0ms:300ms"
    return {**netplan.defaults(), "net_link": spec,
            "device": netplan.device_label(netlink.parse(spec)),
            "probes": ["net:page", "net:handshake"],
            "loads": ["none", "download:1", "download:4"],
            "policies": ["default", "background"], "preset": "slow-link",
            "min_runs": 8, "max_runs": 40, "max_time_s": 10 * 60.0}


def _iocost_here() -> bool:
    """Whether bench can switch io.cost on here: cgroup v2 with io.cost, in a scope systemd
    delegates (`config.check_group_controls`'s conditions)."""
    from .. import systemd
    from ..kernel import cgroups
    from ..policy import cgroup_plan, grammar

    policy = grammar.BUILTIN["iocost"]
    return (cgroup_plan.missing(policy, cgroups.unified_root()) is None
            and systemd.manages_cgroups(systemd.read_facts()))


def ssd() -> dict[str, Any]:
    """The SSD question, side by side (docs/measurements/ssd.md): a non-rotational testbed under
    each of the kernel's schedulers (none is its default for NVMe, mq-deadline for SATA), the
    cold start unprotected and with the background policy (and where cgroup v2 has io.cost, with
    io.cost on and weight 10), under sequential readers, buffered writers and a package manager
    installing and removing (dpkg). Each load lives for a cell's block of trials, every cell
    until decided or 10 trials, the trials' time bounded at 14 minutes: under 20 minutes on the
    development VM."""
    return dict(probes=[f"python={PYTHON_PROBE}"],
                loads=["none", "readers:10:seq", "writers:2:seq:buffered", "dpkg-loop"],
                policies=["default", "background", *(["iocost"] if _iocost_here() else [])],
                schedulers=["none", "mq-deadline", "kyber", "bfq"], rotational=0,
                device="testbed:4G", trials=6, settle_s=2.0, timeout_s=60.0, preset="ssd",
                min_runs=6, max_runs=10, max_time_s=14 * 60.0)


PRESETS = {"quick": quick, "office-hdd": office_hdd, "s-startup": s_startup,
           "slow-link": slow_link, "ssd": ssd}
