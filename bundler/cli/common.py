"""Plumbing every command shares: output streams, progress, times, inputs and option blocks."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import click

from bundler.cli.invoked import may_name_a_parameter, option_record
from bundler.core import jsonout, times
from bundler.core.errors import (
    InputError,
    UsageError,
)
from bundler.core.limits import DEFAULT_MAX_BYTES
from bundler.core.textsafe import shown

# --------------------------------------------------------------------------- plumbing


EPILOG_EXIT = (
    "Exit codes: 0 success/verified, 1 verification failed or --strict found something "
    "missing, 2 usage error, 3 input error, 4 permission denied, 5 object storage error."
)


def _emit_json(value: Any) -> None:
    """One result as one line of JSON Lines (SPEC 7), so `jq` reads one or many alike;
    a library parameter its texts name is spelled as the command's option
    (``bundler.cli.invoked.option_record``)."""
    sys.stdout.buffer.write(jsonout.dumps(option_record(value)) + b"\n")
    sys.stdout.flush()


_CLAIMS_PER_WRITE = 1000


def verification_chunks(result: Any, *, indent: bool = False, **fields: Any) -> Iterator[bytes]:
    """A verification record as JSON (``jsonout``; no newline), in chunks, its claims a
    thousand at a time and last: a hostile bundle can give 130,000 failed claims with
    long names, a record of about 100 MB, and neither it nor a copy of its claims is
    ever held whole (SPEC 5's memory bound). ``fields`` replace the record's; with
    ``indent``, laid out as ``jsonout.dumps(..., indent=True)`` lays out a record."""
    record = {**result.to_json(claims=False), **fields}
    del record["claims"]
    record["exit_code"] = record.pop("exit_code")  # just before the claims (RecordSpool)
    record["claims"] = None  # last: the claims follow it
    head = jsonout.dumps(option_record(record), indent=indent)
    tail = b'\n  "claims": null\n}' if indent else b',"claims":null}'
    assert head.endswith(tail)
    claims = result.claims
    if not claims:
        yield head[: -len(b"null\n}" if indent else b"null}")] + (b"[]\n}" if indent else b"[]}")
        return
    yield head[: -len(tail)] + (b'\n  "claims": [' if indent else b',"claims":[')
    for start in range(0, len(claims), _CLAIMS_PER_WRITE):
        batch = [c.to_json() for c in claims[start : start + _CLAIMS_PER_WRITE]]
        data = jsonout.dumps(batch, indent=indent)
        if may_name_a_parameter(data):
            data = jsonout.dumps(option_record(batch), indent=indent)
        data = data[1:-1]
        if indent:  # one level deeper than a list of its own: two more spaces a line
            data = data.rstrip(b"\n").replace(b"\n", b"\n  ")
        yield data if start == 0 else b"," + data
    yield b"\n  ]\n}" if indent else b"]}"


class RecordSpool:
    """Verification records held in a temporary file until the run's exit code is known
    (SPEC 7: with several bundles every line carries it), so that the records of many
    bundles are never all in memory at once: each is written with the placeholder 9 and
    its digit is set when the run ends."""

    _MARK = b'"exit_code":9,"claims":['

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by emit
        self._marks: list[int] = []

    def add(self, result: Any) -> None:
        chunks = verification_chunks(result, exit_code=9)
        first = next(chunks)
        at = first.rfind(self._MARK)
        assert at >= 0, "the exit code stands just before the claims"
        self._marks.append(self._file.tell() + at + len(b'"exit_code":'))
        self._file.write(first)
        for chunk in chunks:
            self._file.write(chunk)
        self._file.write(b"\n")

    def emit(self, code: int) -> None:
        """Every record, with ``code`` (one digit), on stdout."""
        assert 0 <= code <= 9
        try:
            for mark in self._marks:
                self._file.seek(mark)
                self._file.write(str(code).encode())
            self._file.seek(0)
            shutil.copyfileobj(self._file, sys.stdout.buffer, 1024 * 1024)
            sys.stdout.flush()
        finally:
            self._file.close()


def _emit_verification(result: Any, **fields: Any) -> None:
    """A verification record as one JSON line (as ``_emit_json``), written in chunks
    (``verification_chunks``)."""
    out = sys.stdout.buffer
    for chunk in verification_chunks(result, **fields):
        out.write(chunk)
    out.write(b"\n")
    sys.stdout.flush()


def _say(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def _note(text: str) -> None:
    """A human note on stderr (a count, where a file went): the one place that decides
    it is shown. Not with ``--quiet``, and not with ``--json``, whose stderr holds only
    progress, warnings and errors (SPEC 7). Errors and warnings go through ``_say``."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and (ctx.params.get("quiet") or ctx.params.get("as_json")):
        return
    _say(text)


class _ProgressLine:
    """A progress bar on stderr (rich), shown only when stderr is a terminal.

    rich rather than Click's progressbar: it draws total, percent, transfer rate and ETA
    for byte counts out of the box, redraws from its own thread at a fixed rate (so a
    callback per chunk costs a lock, not a redraw), and keeps the bar on stderr while
    results go to stdout. Imported only when a bar is shown, so scripts and pipes do not
    pay for it. Without a known total it shows bytes and rate only.
    """

    def __init__(
        self, enabled: bool, label: str, total: int | None = None, *, unit: str = "bytes"
    ) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.label = label
        self._done = 0
        self._bar: Any = None
        self._task: Any = None
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        # Bytes show size and transfer rate; counted items (bundles checked) show "N/M".
        amount: list[ProgressColumn] = (
            [DownloadColumn(binary_units=True), TransferSpeedColumn()]
            if unit == "bytes"
            else [MofNCompleteColumn()]
        )
        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            *amount,
            TimeRemainingColumn(),
            TextColumn("{task.fields[note]}"),
            console=Console(file=sys.stderr),
            transient=True,
            refresh_per_second=8,
        )
        self._task = self._bar.add_task(label, total=total, note="")
        self._bar.start()

    def set_total(self, total: int | None) -> None:
        """The size of the work, once it is known (e.g. after a HEAD request)."""
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def to(self, done: int, note: str = "") -> None:
        """``done`` units of the total so far (a running count)."""
        self._done = done
        if self._bar is not None:
            self._bar.update(self._task, completed=done, note=note)

    def add(self, n: int) -> None:
        """``n`` more units (for callbacks that report each chunk)."""
        self.to(self._done + n)

    def update(self, progress: Any) -> None:
        """A library ``Progress`` report (``bundler.api.results.Progress``)."""
        if progress.total is not None:
            self.set_total(progress.total)
        self.to(progress.done, note=progress.note)

    def callback(self) -> Callable[[Any], None] | None:
        """The ``on_progress`` of a library call: None when nothing is shown."""
        return self.update if self.enabled else None

    def done(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _bytes_progress(line: _ProgressLine) -> Callable[[int], None] | None:
    """A running-count callback for ``line``; None when nothing is shown, to save calls."""
    return line.to if line.enabled else None


def _chunk_progress(line: _ProgressLine) -> Callable[[int], None] | None:
    """A per-chunk callback for ``line`` (storage reports each chunk's size)."""
    return line.add if line.enabled else None


def _human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    return f"{n} B"


def _parse_timestamp(value: str, option: str) -> datetime:
    """RFC 3339 with Z or an offset, whole seconds, in UTC (``bundler.core.times``).

    Raises ParameterError (exit 2) naming ``option``.
    """
    return times.parse_timestamp(value, option)


def _exported_at(value: str | None) -> datetime:
    """The export time from --exported-at, else $SOURCE_DATE_EPOCH, else now (SPEC 7).

    Raises ParameterError (exit 2) naming the option or the variable when the value is
    not a time or lies outside what the archive's tar headers can hold.
    """
    return times.export_time(value, "--exported-at", dict(os.environ), time.time())


def _time_source(value: str | None) -> str:
    """What gave the export time, as messages that refuse it name it."""
    return times.time_source(value, "--exported-at", dict(os.environ))


@contextmanager
def _input_stream(path: str) -> Iterator[BinaryIO]:
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        fh = open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    with fh:
        yield fh


def _input_chunks(path: str) -> Iterator[bytes]:
    """The bytes of FILE (``-``: standard input) a megabyte at a time, never held whole; a
    read that fails (a directory, a disk gone) is an InputError naming it."""
    with _input_stream(path) as fh:
        while True:
            try:
                chunk = fh.read(1 << 20)
            except OSError as exc:
                raise InputError(
                    f"{_source_name(path)}: cannot read ({exc.strerror or exc})"
                ) from exc
            if not chunk:
                return
            yield chunk


def _read_input(path: str, *, limit: int, what: str) -> bytes:
    """The bytes of FILE (or ``-``), refused past ``limit`` (SPEC 5's memory bound:
    nothing is read whole without one)."""
    data = bytearray()
    for chunk in _input_chunks(path):
        data += chunk
        if len(data) > limit:
            raise InputError(
                f"{_source_name(path)}: over the {limit} bytes {what} may hold here; refused"
            )
    return bytes(data)


def _source_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


class _LocalPath(click.Path):
    """A local path option or argument, as a ``Path``: a value that begins like a URL is
    refused naming it as typed (a Path would squash its ``//``; ``params.not_local``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(path_type=Path, **kwargs)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from bundler.api.params import not_local

        rule = not_local(value) if isinstance(value, str) else None
        if rule is not None:
            self.fail(f"{value!r}: {rule}", param, ctx)
        return super().convert(value, param, ctx)


class _Count(click.IntRange):
    """A whole number as Click's IntRange reads it, bounded above by ``params.INT_MAX``
    too, and never echoing a huge value whole: a 5000-digit argument is refused in one
    short line, not a screenful (nor Python's digit limit as a traceback). Every value
    out of range, however many digits it has, is told the option's real range (its own
    bound, else ``INT_MAX``), in Click's spelling of a range."""

    def __init__(self, low: int, high: int | None = None) -> None:
        super().__init__(min=low, max=high)

    def _range(self) -> str:
        from bundler.api.params import INT_MAX

        high = INT_MAX if self.max is None else min(int(self.max), INT_MAX)
        return f"{self.min}<=x<={high}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from bundler.api.params import INT_MAX

        high = INT_MAX if self.max is None else min(int(self.max), INT_MAX)
        if isinstance(value, str):
            text = value.strip()
            shown_text = text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"
            if not re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII):
                self.fail(f"{shown_text!r} is not a whole number", param, ctx)
            if len(text.lstrip("+-").lstrip("0")) > 19:
                self.fail(f"{shown_text} is not in the range {self._range()}.", param, ctx)
            value = int(text)
        if isinstance(value, int) and not isinstance(value, bool):
            low = self.min if self.min is not None else -INT_MAX
            if not low <= value <= high:
                self.fail(f"{value} is not in the range {self._range()}.", param, ctx)
        number = super().convert(value, param, ctx)
        return number


class _ArchiveOrUrl(click.ParamType[Any]):
    """A local archive path (as ``_LocalPath`` gives it) or an s3:// URL kept as the
    string it is (a Path would squash its ``//``)."""

    name = "BUNDLE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.startswith("s3://"):
            return value
        return _LocalPath().convert(value, param, ctx)


F = TypeVar("F", bound=Callable[..., Any])


def _quiet_option(command: F) -> F:
    """-q/--quiet, the same everywhere (SPEC 7): stderr carries errors and security
    warnings only; the result on stdout is unchanged."""
    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        help="No progress or notes on stderr (errors and warnings still); stdout unchanged.",
    )(command)


def _key_option(*, required: bool = False) -> Callable[[F], F]:
    """--key: an OpenSSH Ed25519 private key to sign with, the same name everywhere."""
    return click.option(
        "--key",
        "key_path",
        required=required,
        type=_LocalPath(),
        help="OpenSSH Ed25519 private key to sign with (passphrase from "
        "$EVALBOOK_SIGN_PASSPHRASE).",
    )


def _sign_key_option(command: F) -> F:
    """--key as export and export-eb take it: the signature goes inside the bundle."""
    return click.option(
        "--key",
        "sign_key",
        type=_LocalPath(),
        help="OpenSSH Ed25519 private key: sign the head and embed bundle-head.json.sig "
        "(passphrase from $EVALBOOK_SIGN_PASSPHRASE).",
    )(command)


def _anchor_options(command: F) -> F:
    """The trust anchors of verify and audit: expected digests and head signatures."""
    for option in reversed(
        [
            click.option(
                "--expect-bundle-digest",
                help="Trust anchor: the bundle digest you expect (sha256:...).",
            ),
            click.option(
                "--expect-report-digest",
                help="Trust anchor: the report digest you expect (sha256:...).",
            ),
            click.option(
                "--allowed-signers",
                type=_LocalPath(),
                help="OpenSSH allowed_signers file: check the head signature.",
            ),
            click.option(
                "--identity", help="Signer identity to require (needs --allowed-signers)."
            ),
            click.option(
                "--signature",
                help="A signature file (- for standard input) or s3:// object to check as "
                "well (needs --allowed-signers; a single BUNDLE): every signature present "
                "is checked too, the embedded one, <archive>.sig and its "
                "countersignatures, or those stored beside an s3:// bundle (SPEC 11.3).",
            ),
        ]
    ):
        command = option(command)
    return command


def _endpoint_option(command: F) -> F:
    return click.option(
        "--endpoint-url",
        metavar="URL",
        help="S3 endpoint for s3:// locations (default $AWS_ENDPOINT_URL_S3, else AWS).",
    )(command)


class _ByteCount(click.IntRange):
    """A positive whole number of bytes in ASCII digits only: ``int()`` would also take a
    sign, ``_`` separators, spaces and other scripts' digits, which the JavaScript
    verifier (js/verify-bundle.mjs) refuses; both read the option alike."""

    name = "bytes"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from bundler.api.params import INT_MAX

        if isinstance(value, str):
            if not re.fullmatch(r"[0-9]+", value, re.ASCII):
                shown_value = value if len(value) <= 40 else value[:40] + "..."
                self.fail(
                    f"{shown_value!r} is not a whole number of bytes in ASCII digits", param, ctx
                )
            # A cap of any size is accepted, as the JavaScript verifier accepts it: one
            # past what any file can hold is no cap beyond the reader's own.
            stripped = value.lstrip("0")
            if len(stripped) > len(str(INT_MAX)) or (stripped and int(stripped) > INT_MAX):
                value = str(INT_MAX)
        return super().convert(value, param, ctx)


def _max_bytes_option(command: F) -> F:
    return click.option(
        "--max-bytes",
        type=_ByteCount(1),
        default=DEFAULT_MAX_BYTES,
        show_default="64 GiB",
        metavar="BYTES",
        help="Refuse archives that decompress to more than BYTES (a guard against "
        "decompression bombs).",
    )(command)


_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,200}", re.ASCII)


def _out_in_directory(out: str, name: str, option: str) -> Path:
    """``--out`` as `cp` reads a destination: an existing directory (or a name ending
    in /) receives ``name`` inside it; anything else is the file itself.

    Raises UsageError (exit 2) for a trailing-slash directory that does not exist, or a
    ``name`` that cannot be a plain file name.
    """
    path = Path(out)
    if out.endswith("/") and not path.is_dir():
        raise UsageError(f"{option} {out!r}: no such directory")
    if not path.is_dir():
        return path
    if not _FILE_NAME.fullmatch(name):
        raise UsageError(f"{option} {out!r}: {name!r} is not a plain file name; give a file")
    return path / name


def _archive_options(command: F) -> F:
    """--exported-at and --level, shared by export and export-eb."""
    command = click.option(
        "--level",
        type=_Count(1, 19),
        metavar="1-19",
        default=3,
        show_default=True,
        help="zstd level (1-19 keep the window within 8 MiB).",
    )(command)
    return click.option(
        "--exported-at",
        metavar="TIME",
        help="RFC 3339 UTC time recorded in the bundle (default $SOURCE_DATE_EPOCH, else now).",
    )(command)


# ------------------------------------------------------------ signing, storage hooks


def _signer(key_path: Path, quiet: bool) -> Callable[[bytes], str]:
    from bundler.trust import sshsig

    passphrase = os.environ.get("EVALBOOK_SIGN_PASSPHRASE")
    key = sshsig.load_private_key(key_path, passphrase=passphrase.encode() if passphrase else None)
    warning = sshsig.key_permissions_warning(key_path)
    if warning:  # a security warning is shown even with --quiet
        _say(f"warning: {shown(warning)}\n")
    return lambda message: sshsig.sign(message, key)


def _storage_config(endpoint_url: str | None) -> Any:
    from bundler import storage

    return storage.StorageConfig(endpoint_url=endpoint_url)
