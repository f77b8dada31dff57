#!/usr/bin/python3
"""The rig's agent inside the guest: JSON-line requests in, JSON-line answers out, over the
virtio-serial port org.backburner.agent (a channel of its own, so nothing the kernel or a
getty writes to the console can be mistaken for an answer).

Requests are answered one at a time, in order; each carries an id the answer repeats, so
the host can drop an answer meant for a request it gave up on. Bytes (stdin, stdout,
stderr, file contents) travel base64-encoded. Standard library only: it runs under the
guest's Debian python3, before anything else is installed.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PORT = "/dev/virtio-ports/org.backburner.agent"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def boot_id() -> str:
    return Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def op_run(req: dict) -> dict:
    """A command to completion in a session of its own: a timeout kills its whole process
    group, so a hung check cannot block the agent for the next one."""
    env = {**os.environ, **req.get("env", {})}
    started = time.monotonic()
    proc = subprocess.Popen(req["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=req.get("cwd") or "/",
                            start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(unb64(req.get("stdin", "")), timeout=req["timeout"])
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    return {"status": proc.returncode, "stdout": b64(out), "stderr": b64(err),
            "timed_out": timed_out, "seconds": round(time.monotonic() - started, 3)}


def op_put(req: dict) -> dict:
    path = Path(req["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.agent-tmp")
    tmp.write_bytes(unb64(req["data"]))
    os.chmod(tmp, req.get("mode", 0o644))
    os.replace(tmp, path)
    return {}


def op_get(req: dict) -> dict:
    return {"data": b64(Path(req["path"]).read_bytes())}


def op_ping(req: dict) -> dict:
    return {"boot_id": boot_id(), "pid": os.getpid()}


def op_reboot(req: dict) -> dict:
    return {"boot_id": boot_id(), "then": ["systemctl", "--no-block", "reboot"]}


OPS = {"run": op_run, "put": op_put, "get": op_get, "ping": op_ping, "reboot": op_reboot}


def answer(req: dict) -> dict:
    rid = req.get("id")
    try:
        return {"id": rid, "ok": True, **OPS[req["op"]](req)}
    except Exception as exc:  # every failure goes back to the host as an answer
        return {"id": rid, "ok": False, "error": f"{type(exc).__name__}: {exc}"}


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def serve(fd: int) -> None:
    # A newline first ends whatever half line an earlier agent (killed by a reboot) left
    # in the host's buffer: the host skips lines that are not whole JSON objects.
    write_all(fd, b"\n")
    buf = b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:  # the host is not connected: nothing to read until it is
            time.sleep(0.1)
            continue
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            try:
                req = json.loads(line)
            except ValueError as exc:
                reply = {"id": None, "ok": False, "error": f"bad request: {exc}"}
            else:
                reply = answer(req)
            then = reply.pop("then", None)
            write_all(fd, json.dumps(reply).encode() + b"\n")
            if then:  # after the answer is out: systemd may stop this service at once
                subprocess.run(then, check=False)


def main() -> int:
    deadline = time.monotonic() + 120
    while not os.path.exists(PORT):
        if time.monotonic() > deadline:
            print(f"{PORT} did not appear", file=sys.stderr)
            return 1
        time.sleep(0.1)
    fd = os.open(PORT, os.O_RDWR | os.O_CLOEXEC)
    print("agent ready", flush=True)
    serve(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
