"""The testbed's HTTP server, run in the server namespace (``python -m
backburner.net.server ADDR PORT CC PAGE_BYTES``): ``/page`` is a small page, ``/bulk``
an endless download, a POST to ``/upload`` a sink that reads until the client closes.
Contents are made on the fly, so nothing is written to disk. Each accepted connection
gets congestion control `CC` (a server's usual cubic, not this host's default), since
the sender's algorithm decides how full the slow link's buffer gets."""

from __future__ import annotations

import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = b"\0" * 65536


class _Handler(BaseHTTPRequestHandler):
    page_bytes = 10_000
    protocol_version = "HTTP/1.0"

    def setup(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION,
                                self.server.cc.encode())  # type: ignore[attr-defined]
        super().setup()

    def do_GET(self) -> None:  # noqa: N802 - the http.server protocol
        if self.path == "/page":
            self.send_response(200)
            self.send_header("Content-Length", str(self.page_bytes))
            self.end_headers()
            self.wfile.write(b"x" * self.page_bytes)
        elif self.path == "/bulk":
            self.send_response(200)
            self.end_headers()
            try:
                while True:
                    self.wfile.write(CHUNK)
            except OSError:
                return
        else:
            self.send_error(404)

    def do_POST(self) -> None:  # noqa: N802 - the http.server protocol
        if self.path != "/upload":
            self.send_error(404)
            return
        try:
            while self.rfile.read1(65536):
                pass
        except OSError:
            return

    def log_message(self, *args: object) -> None:
        pass


def main(argv: list[str]) -> int:
    addr, port, cc, page = argv[0], int(argv[1]), argv[2], int(argv[3])
    _Handler.page_bytes = page
    server = ThreadingHTTPServer((addr, port), _Handler)
    server.daemon_threads = True
    server.cc = cc  # type: ignore[attr-defined]
    print("ready", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
