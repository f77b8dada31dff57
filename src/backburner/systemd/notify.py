"""sd_notify(3) without libsystemd: how a Type=notify service tells systemd it is ready
(its state in place, so units ordered after it may start), reloading or stopping."""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)


def sd_notify(message: str) -> None:
    """Tell systemd (Type=notify) how we are: one datagram to $NOTIFY_SOCKET, if set."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.sendto(message.encode(), address)
    except OSError as err:
        log.warning("could not notify systemd: %s", err)
