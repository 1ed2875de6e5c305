"""A loopback HTTP proxy that corrupts request bodies in transit, throttles, and
resets connections.

It sits between the S3 client and the test server (the client's endpoint is the
proxy), forwards every byte unchanged except one: in the body of a matching request
(by default, any PUT with a body: PutObject and UploadPart) it flips the bits of the
middle byte. Headers, and so the request signature and checksum headers, are left
alone, which is exactly what a faulty NIC, middlebox or disk cache would do. The
server must then refuse the request.

With ``fault``, a function of (method, target) that answers ``"throttle"``, ``"reset"``
or None for each request, it also does what a busy service and a broken network do:
``throttle`` answers 503 SlowDown itself (S3's throttling answer) without forwarding;
``deny`` answers 403 AccessDenied itself (a refusal no retry changes);
``reset`` forwards the request and resets the connection (TCP RST) once
``RESET_AFTER`` bytes of the answer have gone back, mid-body for any object larger.

Only 127.0.0.1 is ever contacted. Requests with ``Transfer-Encoding: chunked`` are
relayed unmodified (the S3 client sends ``Content-Length`` bodies).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

HOST = "127.0.0.1"
_BUFFER = 256 * 1024
_MAX_HEADER = 64 * 1024
RESET_AFTER = 4096
_SLOW_DOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
_SLOW_DOWN = (
    b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
    b"x-amz-request-id: PROXY\r\nContent-Length: "
    + str(len(_SLOW_DOWN_BODY)).encode()
    + b"\r\n\r\n"
    + _SLOW_DOWN_BODY
)

_DENIED_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message></Error>"
)
_DENIED = (
    b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\n"
    b"x-amz-request-id: PROXY\r\nContent-Length: "
    + str(len(_DENIED_BODY)).encode()
    + b"\r\n\r\n"
    + _DENIED_BODY
)


def corrupt_puts(method: str, target: str) -> bool:
    """The default selector: every PUT (PutObject and UploadPart)."""
    return method == "PUT"


def corrupt_parts(method: str, target: str) -> bool:
    """Only UploadPart requests (PUT with a partNumber)."""
    return method == "PUT" and "partNumber=" in target


def no_corruption(method: str, target: str) -> bool:
    """Flip nothing (for a proxy that only throttles or resets)."""
    return False


@dataclass
class _Link:
    """One client connection's state shared by its two relay threads."""

    client: socket.socket
    upstream: socket.socket
    reset_after: int | None = None  # bytes of answer still to relay before the RST


@dataclass
class FaultyProxy:
    """Forward 127.0.0.1:<port> to 127.0.0.1:``target_port``, flipping one body byte in
    up to ``max_flips`` requests that ``select(method, target)`` accepts."""

    target_port: int
    select: Callable[[str, str], bool] = corrupt_puts
    max_flips: int | None = None
    fault: Callable[[str, str], str | None] | None = None
    flipped: int = 0
    throttled: int = 0
    resets: int = 0
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
            link = _Link(client, upstream)
            threading.Thread(
                target=self._answers, args=(link,), name="proxy-down", daemon=True
            ).start()
            threading.Thread(
                target=self._requests, args=(client, upstream, link), name="proxy-up", daemon=True
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

    def _answers(self, link: _Link) -> None:
        """Relay the server's answers to the client, resetting when a fault asks."""
        try:
            while data := link.upstream.recv(_BUFFER):
                if link.reset_after is not None:
                    if len(data) >= link.reset_after:
                        link.client.sendall(data[: link.reset_after])
                        self._reset(link)
                        return
                    link.reset_after -= len(data)
                link.client.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                link.client.shutdown(socket.SHUT_WR)

    def _reset(self, link: _Link) -> None:
        with self._lock:
            self.resets += 1
        # SO_LINGER with a zero timeout makes the last close send RST instead of FIN.
        # SHUT_RD first wakes the request thread blocked reading this socket: until
        # it returns, the kernel keeps the socket open whatever close() is called.
        with contextlib.suppress(OSError):
            link.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            link.client.shutdown(socket.SHUT_RD)
        for sock in (link.client, link.upstream):
            with contextlib.suppress(OSError):
                sock.close()

    def _fault_for(self, method: str, target: str) -> str | None:
        with self._lock:
            self.requests.append((method, target))
            if self.fault is None:
                return None
            what = self.fault(method, target)
            if what == "throttle":
                self.throttled += 1
            return what

    def _should_flip(self, method: str, target: str) -> bool:
        with self._lock:
            if not self.select(method, target):
                return False
            if self.max_flips is not None and self.flipped >= self.max_flips:
                return False
            self.flipped += 1
            return True

    def _requests(self, client: socket.socket, upstream: socket.socket, link: _Link) -> None:
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
                fault = self._fault_for(method, target)
                if fault == "throttle" and not int(headers.get("content-length", "0") or 0):
                    # Answer for the server; the request never reaches it.
                    client.sendall(_SLOW_DOWN)
                    continue
                if fault == "deny" and not int(headers.get("content-length", "0") or 0):
                    client.sendall(_DENIED)
                    continue
                if fault == "reset":
                    link.reset_after = RESET_AFTER
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
