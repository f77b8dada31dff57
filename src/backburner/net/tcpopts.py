"""What the job's TCP sockets get from the sock_ops program (its window clamp, its
congestion control), and the check, before anything changes, that this kernel does it.

A kernel may load the program and still not do what it asks: `bpf_setsockopt` answers an
option it does not know with an error at run time, which nobody sees. So the check is a
real one: in a throwaway transaction, a group of its own with the program on it and one
process in it that opens a TCP connection over loopback and reads back what its socket
got (``python -m backburner.net.tcpopts``). The throwaway group and program are gone
before the check returns.

The low-priority congestion control for the job's uploads is TCP-LP (`lp`), where the
kernel has it (built in, loaded, or a module `modprobe` can load); Linux has no LEDBAT.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess

from .. import spawn, system
from ..base.errors import SystemStateError, UnavailableError
from ..kernel import cgroups
from ..kernel.bpf import calls as bpf
from ..kernel.bpf import cgroup_programs
from ..system.bpf import PIN_WINDOW, bpf_program_settings

#: The low-priority congestion control, and its module.
LOW_PRIORITY_CC = "lp"
LOW_PRIORITY_MODULE = "tcp_lp"
#: The clamp the check asks for; any value the kernel does not round will do.
_PROBE_CLAMP = 5000
AVAILABLE_CC = "/proc/sys/net/ipv4/tcp_available_congestion_control"


def available_cc() -> list[str]:
    try:
        with open(AVAILABLE_CC) as f:
            return f.read().split()
    except OSError:
        return []


def low_priority_cc() -> str | None:
    """TCP-LP's name when this kernel has it or can load it, else None."""
    if LOW_PRIORITY_CC in available_cc() or system.module_available(LOW_PRIORITY_MODULE):
        return LOW_PRIORITY_CC
    return None


def cc_changes(cc: str | None) -> list[system.Change]:
    """The module load `cc` needs first (none when it is built in or loaded)."""
    if cc is None or cc in available_cc():
        return []
    return [system.KernelModule(f"tcp_{cc}")]


def check(cc: str | None = None, parent: str | None = None, scope_pins: str | None = None
          ) -> None:
    """That the sock_ops program loads here and clamps a socket's window, and (with `cc`)
    that this kernel has that congestion control; else one line (69). Changes nothing
    that outlives the call. `parent`: the group the throwaway one is made in (a group of
    ours where systemd owns the tree: a delegated unit's); by default the root.
    `scope_pins`: where systemd owns the tree and no group is ours, the probe runs in a
    transient scope of its own instead, the program pinned in this bpffs for systemd to
    attach (BPFProgram=), as a unit's is."""
    if cc is not None and cc not in available_cc() and not system.module_available(f"tcp_{cc}"):
        raise UnavailableError(f"this kernel has no congestion control {cc!r} (module "
                               f"tcp_{cc}); it has {', '.join(available_cc()) or 'none'}")
    root = cgroups.unified_root()
    if root is None:
        raise UnavailableError("the window clamp needs a cgroup v2 hierarchy, and none is "
                               "mounted")
    out = _probe_in_scope(scope_pins) if scope_pins else _probe_in_group(parent or root)
    got = json.loads(out)
    if got["window_clamp"] != _PROBE_CLAMP:
        raise UnavailableError("this kernel loads the sock_ops program but its "
                               "bpf_setsockopt does not clamp the window (TCP_WINDOW_CLAMP)",
                               "it needs Linux 5.11 or later")


def _probe_in_group(parent: str) -> bytes:
    with system.Transaction("net-tcpopts-check") as tx:
        group = os.path.join(parent, f"bbcheck-{secrets.token_hex(3)}")
        tx.apply(system.CgroupDir(group))
        tx.apply(system.CgroupSockOps(group, None, _PROBE_CLAMP, 2))
        child = spawn.launch(spawn.python_module("backburner.net.tcpopts"),
                             cgroup_procs=(cgroups.procs_file(group),),
                             stdout=subprocess.PIPE, die_with_parent=True)
        return _probe_output(child)


def _probe_in_scope(pins: str) -> bytes:
    from ..systemd.bus import Bus

    name = f"backburner-check-{secrets.token_hex(3)}"
    with system.Transaction("net-tcpopts-check") as tx:
        tx.apply(system.PinnedPrograms(pins, 0, 0, None, name))
        window = bpf.pinned(os.path.join(pins, name, PIN_WINDOW))
        try:
            cgroup_programs.set_window(window, _PROBE_CLAMP, 2)
        finally:
            os.close(window)
        attach = [tuple(p.split(":", 1)) for p in bpf_program_settings(pins, name)
                  if p.startswith("sock_ops:")]

        def join_scope() -> None:
            with Bus.connect() as bus:
                bus.start_scope(f"{name}.scope", os.getpid(), "system.slice", [],
                                "backburner: the window clamp's kernel probe",
                                extra=[("BPFProgram", ("a(ss)", attach))])

        child = spawn.launch(spawn.python_module("backburner.net.tcpopts"),
                             before_exec=join_scope, stdout=subprocess.PIPE,
                             die_with_parent=True)
        return _probe_output(child)


def _probe_output(child: spawn.Child) -> bytes:
    out = child.popen.stdout.read() if child.popen.stdout else b""
    if not child.wait().ok:
        raise SystemStateError("the window clamp's check could not open a TCP "
                               "connection over loopback")
    return out


def socket_options(sock: socket.socket) -> dict[str, object]:
    """What a connected TCP socket got: its window clamp and congestion control."""
    return {
        "window_clamp": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP),
        "cc": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
        .rstrip(b"\0").decode(),
    }


def _probe() -> dict[str, object]:
    """A TCP connection to ourselves over loopback, one byte each way (so the socket sends
    a segment with the program called), and what the connecting socket got."""
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.create_connection(server.getsockname(), timeout=5) as sock:
        peer, _ = server.accept()
        with peer:
            sock.sendall(b"x")
            peer.recv(1)
            peer.sendall(b"y")
            sock.recv(1)
            sock.sendall(b"z")
            peer.recv(1)
            return socket_options(sock)


if __name__ == "__main__":
    print(json.dumps(_probe()), flush=True)
