"""A loopback HTTP proxy that corrupts request bodies in transit.

It sits between the S3 client and the test server (the client's endpoint is the
proxy), forwards every byte unchanged except one: in the body of a matching request
(by default, any PUT with a body: PutObject and UploadPart) it flips the bits of the
middle byte. Headers, and so the request signature and checksum headers, are left
alone, which is exactly what a faulty NIC, middlebox or disk cache would do. The
server must then refuse the request.

Only 127.0.0.1 is ever contacted. Requests with ``Transfer-Encoding: chunked`` are
relayed unmodified (the S3 client sends ``Content-Length`` bodies).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

HOST = "127.0.0.1"
_BUFFER = 256 * 1024
_MAX_HEADER = 64 * 1024


def corrupt_puts(method: str, target: str) -> bool:
    """The default selector: every PUT (PutObject and UploadPart)."""
    return method == "PUT"


def corrupt_parts(method: str, target: str) -> bool:
    """Only UploadPart requests (PUT with a partNumber)."""
    return method == "PUT" and "partNumber=" in target


@dataclass
class FaultyProxy:
    """Forward 127.0.0.1:<port> to 127.0.0.1:``target_port``, flipping one body byte in
    up to ``max_flips`` requests that ``select(method, target)`` accepts."""

    target_port: int
    select: Callable[[str, str], bool] = corrupt_puts
    max_flips: int | None = None
    flipped: int = 0
    requests: list[tuple[str, str]] = field(default_factory=list)
    _listener: socket.socket | None = field(default=None, repr=False)
    _sockets: list[socket.socket] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def port(self) -> int:
        assert self._listener is not None
        return int(self._listener.getsockname()[1])

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> FaultyProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, 0))
        listener.listen(32)
        self._listener = listener
        threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> FaultyProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((HOST, self.target_port), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(
                target=self._pipe, args=(upstream, client), name="proxy-down", daemon=True
            ).start()
            threading.Thread(
                target=self._requests, args=(client, upstream), name="proxy-up", daemon=True
            ).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(_BUFFER):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def _should_flip(self, method: str, target: str) -> bool:
        with self._lock:
            self.requests.append((method, target))
            if not self.select(method, target):
                return False
            if self.max_flips is not None and self.flipped >= self.max_flips:
                return False
            self.flipped += 1
            return True

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        """Relay requests one by one, parsing just enough HTTP to find each body."""
        pending = b""
        try:
            while True:
                while b"\r\n\r\n" not in pending:
                    data = client.recv(_BUFFER)
                    if not data:
                        return
                    pending += data
                    if len(pending) > _MAX_HEADER and b"\r\n\r\n" not in pending:
                        self._pipe_rest(pending, client, upstream)
                        return
                head, _, pending = pending.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target = [*lines[0].split(" "), "", ""][:2]
                headers = {
                    name.strip().lower(): value.strip()
                    for name, _, value in (line.partition(":") for line in lines[1:])
                }
                upstream.sendall(head + b"\r\n\r\n")
                if "chunked" in headers.get("transfer-encoding", "").lower():
                    self._pipe_rest(pending, client, upstream)
                    return
                length = int(headers.get("content-length", "0") or 0)
                flip_at = length // 2 if length and self._should_flip(method, target) else -1
                sent = 0
                while sent < length:
                    if not pending:
                        pending = client.recv(_BUFFER)
                        if not pending:
                            return
                    piece, pending = pending[: length - sent], pending[length - sent :]
                    if sent <= flip_at < sent + len(piece):
                        mutable = bytearray(piece)
                        mutable[flip_at - sent] ^= 0xFF
                        piece = bytes(mutable)
                    upstream.sendall(piece)
                    sent += len(piece)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                upstream.shutdown(socket.SHUT_WR)

    @staticmethod
    def _pipe_rest(pending: bytes, client: socket.socket, upstream: socket.socket) -> None:
        upstream.sendall(pending)
        while data := client.recv(_BUFFER):
            upstream.sendall(data)
