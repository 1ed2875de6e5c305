"""The parameters of the library's functions, checked before any work (SPEC 7.1).

Each helper takes the value a caller passed and the parameter's name, and returns the
one type the implementation works with, or raises ``ParameterError`` (exit 2) naming
the parameter: the wrong type, an empty or NUL-holding path, a naive time, a malformed
digest. Files are checked here only for what the parameter itself says (an input that
must exist, an output that must not); what a file holds is the implementation's to
judge, and its errors name the file.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from bundler.core import times
from bundler.core.errors import BundlerError, InputError, ParameterError

PathArg = str | os.PathLike[str]

# A value that begins like a URL (``s3://``, ``http://``, ``file://``).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _type_name(value: object) -> str:
    return type(value).__name__


# How much of a refused value a message repeats: enough to recognise it, never a flood.
SHOWN_CHARS = 140


def shown_value(value: str) -> str:
    """``value`` as a message repeats it: cut to ``SHOWN_CHARS`` characters."""
    return value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + "..."


def encodable(value: str, param: str) -> str:
    """A ``str`` that can be a file name or a text: one the system can encode. A lone
    surrogate that stands for a raw byte (U+DC80..U+DCFF, as Python decodes a file name
    that is not UTF-8) can; any other (``"\\ud800"``) cannot be written, stored or
    passed to the system at all, so it is refused here, for every path and text
    parameter, rather than escaping later as a ``UnicodeEncodeError``."""
    try:
        value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        raise ParameterError(
            param,
            f"holds the lone surrogate U+{ord(bad):04X}, which no file name or text can hold",
            value=shown_value(value),
        ) from None
    return value


def path(value: object, param: str) -> Path:
    """A ``str`` or ``os.PathLike`` naming a file: not empty, no NUL, not bytes, and one
    the system can encode (``encodable``)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ParameterError(param, f"expected a str or os.PathLike path, not {_type_name(value)}")
    encodable(value, param)
    if not value:
        raise ParameterError(param, "an empty path")
    if "\0" in value:
        raise ParameterError(param, "a path holding a NUL character", value=value)
    rule = not_local(value)
    if rule is not None:
        raise ParameterError(param, rule, value=value)
    return Path(value)


def not_local(value: str) -> str | None:
    """Why ``value`` cannot be a local path (it begins like a URL), or None.

    A URL is no local path: as a Path its // would collapse, and messages would name a
    file nobody typed. s3:// is read only where a parameter says so (``location``),
    which looks before asking here. The command line's path options ask here too."""
    if not _URL.match(value):
        return None
    if value.startswith("s3://"):
        return "an s3:// location is not read here; a local path is needed"
    return "a URL; a local path is needed (or an s3:// location where one is read)"


def optional_path(value: object, param: str) -> Path | None:
    return None if value is None else path(value, param)


def location(value: object, param: str) -> str:
    """A local path (``str`` or ``os.PathLike``) or an ``s3://`` URL, as text."""
    if isinstance(value, str) and value.startswith("s3://"):
        _s3_url(encodable(value, param), param)
        return value
    return str(path(value, param))


def s3_url(value: object, param: str) -> str:
    """An ``s3://bucket/...`` URL."""
    if not isinstance(value, str):
        raise ParameterError(param, f"expected an s3://bucket/... URL, not {_type_name(value)}")
    encodable(value, param)
    if not value.startswith("s3://"):
        raise ParameterError(param, "not an s3://bucket/... URL", value=shown_value(value))
    _s3_url(value, param)
    return value


def _s3_url(value: str, param: str) -> None:
    from bundler import storage

    try:
        storage.parse_s3_url(value)
    except BundlerError as exc:
        raise ParameterError(param, exc.message) from exc


def archive_prefix(value: object, param: str) -> str:
    """An ``s3://bucket/prefix`` URL naming an archive (upload, list, fixity): a key (one
    ending in .tar.zst, or inside ``<prefix>/reports/bundles/``) is refused naming the
    parameter and the prefix to use (SPEC 6)."""
    from bundler import storage

    url = s3_url(value, param)
    try:
        storage.check_archive_prefix(storage.parse_s3_url(url))
    except BundlerError as exc:
        raise ParameterError(param, exc.message) from exc
    return url


def text(value: object, param: str) -> str:
    """A non-empty ``str`` without NUL that the system can encode (``encodable``): an
    id, a principal, an identity, a label."""
    if not isinstance(value, str):
        raise ParameterError(param, f"expected a str, not {_type_name(value)}")
    encodable(value, param)
    if not value:
        raise ParameterError(param, "empty")
    if "\0" in value:
        raise ParameterError(param, "holds a NUL character", value=value)
    return value


def identifier(value: object, param: str, what: str) -> str:
    """A store identifier (a report id): ``^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`` (SPEC 3);
    anything else is a bad parameter (exit 2), never a path to try."""
    from bundler.evalbook.store import IDENTIFIER_RE

    name = text(value, param)
    if IDENTIFIER_RE.match(name) is None:
        raise ParameterError(
            param,
            f"invalid {what} (identifiers match ^[A-Za-z0-9][A-Za-z0-9._-]{{0,127}}$)",
            value=shown_value(name),
        )
    return name


def endpoint(value: object, param: str = "endpoint_url") -> str | None:
    """``None`` (``$AWS_ENDPOINT_URL_S3``, else AWS) or an ``http://``/``https://`` URL:
    the rule ``storage.StorageConfig`` keeps, checked here so that the error names the
    parameter."""
    url = optional_text(value, param)
    if url is not None and not url.startswith(("http://", "https://")):
        raise ParameterError(param, "must start with http:// or https://", value=url)
    return url


# A Dask scheduler's address: a scheme carried over TCP, a host and a port.
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss")
_SCHEDULER = re.compile(
    r"(?P<scheme>[a-z]+)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>[0-9]{1,5})",
    re.ASCII,
)
# Longer than any host name (253) with scheme and port: no address, only a mistake.
SCHEDULER_MAX_CHARS = 300


def scheduler(value: object, param: str = "scheduler") -> tuple[str, str, int] | None:
    """``None`` or a Dask scheduler address ``scheme://host:port`` (scheme tcp, tls, ws
    or wss; port 1..65535), as (address, host, port): anything else is refused here,
    before any connection or file, naming the parameter (the value shown cut short)."""
    address = optional_text(value, param)
    if address is None:
        return None
    rule = f"not a scheduler address ({'|'.join(SCHEDULER_SCHEMES)})://HOST:PORT"
    if len(address) > SCHEDULER_MAX_CHARS:
        raise ParameterError(
            param,
            f"{rule}: {len(address)} characters (at most {SCHEDULER_MAX_CHARS})",
            value=shown_value(address),
        )
    found = _SCHEDULER.fullmatch(address)
    if found is None or found["scheme"] not in SCHEDULER_SCHEMES:
        raise ParameterError(param, rule, value=shown_value(address))
    port = int(found["port"])
    if not 1 <= port <= 65535:
        raise ParameterError(param, f"port {port} is out of range (1..65535)", value=address)
    return address, found["host"].strip("[]"), port


def optional_text(value: object, param: str) -> str | None:
    return None if value is None else text(value, param)


def flag(value: object, param: str) -> bool:
    """A ``bool`` (not 0 or 1, not a string: ``strict="no"`` must not mean yes)."""
    if not isinstance(value, bool):
        raise ParameterError(param, f"expected True or False, not {_type_name(value)}")
    return value


# The largest count any parameter may carry: what a signed 64-bit integer holds, so a
# value passes unchanged through the ledger (SQLite), JSON records and size arithmetic.
# Every integer parameter is bounded by it unless its own bound is lower.
INT_MAX = 2**63 - 1


def integer(value: object, param: str, low: int, high: int = INT_MAX) -> int:
    """An ``int`` (not a bool or float) within ``low``..``high`` (at most ``INT_MAX``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParameterError(param, f"expected an int, not {_type_name(value)}")
    high = min(high, INT_MAX)
    if value < low or value > high:
        bound = f"{low}..{high}" if high < INT_MAX else f"{low}..2**63-1"
        # A huge value is not repeated: its digits would fill many lines (and ``str``
        # refuses an int of more than 4300 digits).
        amount = str(value) if value.bit_length() <= 96 else f"a {value.bit_length()}-bit value"
        raise ParameterError(param, f"{amount} is out of range ({bound})")
    return value


def optional_integer(value: object, param: str, low: int, high: int = INT_MAX) -> int | None:
    return None if value is None else integer(value, param, low, high)


def choice(value: object, param: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ParameterError(param, f"expected one of {', '.join(allowed)}, not {value!r}")
    return value


def digest(value: object, param: str) -> str | None:
    """``None`` or a ``sha256:<64 hex>`` digest."""
    if value is None:
        return None
    from bundler.core.digests import parse_digest

    given = text(value, param)
    try:
        parse_digest(given, source=param)
    except ParameterError:
        raise
    except BundlerError as exc:
        raise ParameterError(param, exc.message.removeprefix(f"{param}: ")) from exc
    return given


def time(value: object, param: str) -> datetime:
    """An aware ``datetime`` or RFC 3339 text, in UTC (``bundler.core.times``)."""
    return times.aware_time(value, param)


def optional_time(value: object, param: str) -> datetime | None:
    return None if value is None else time(value, param)


def existing_input(value: Path, param: str, *, directory_ok: bool = True) -> Path:
    """An input that must exist and be a regular file (or a directory where allowed):
    a FIFO, a socket or a device is refused before anything opens it, so nothing hangs.
    Raises InputError (exit 3) naming the parameter and the file."""
    try:
        info = os.stat(value)
    except FileNotFoundError as exc:
        raise InputError(f"{param}: {value}: not found (does not exist)", param=param) from exc
    except OSError as exc:
        raise InputError(f"{param}: {value}: cannot read ({exc.strerror})", param=param) from exc
    if stat.S_ISDIR(info.st_mode):
        if directory_ok:
            return value
        raise InputError(f"{param}: {value}: is a directory; a file is needed", param=param)
    if not stat.S_ISREG(info.st_mode):
        wanted = "a regular file or directory" if directory_ok else "a regular file"
        raise InputError(f"{param}: {value}: not {wanted}", param=param)
    return value


def input_location(value: object, param: str, *, directory_ok: bool = True) -> str:
    """A bundle to read: an ``s3://`` URL, or an existing regular file or directory."""
    where = location(value, param)
    if not where.startswith("s3://"):
        existing_input(Path(where), param, directory_ok=directory_ok)
    return where


def output(value: object, param: str, *, existing_file_ok: bool = False) -> Path:
    """An output path: ``str`` or ``os.PathLike``, in a directory that exists, and not an
    existing file (unless ``existing_file_ok``: a ledger), FIFO, device or link. An
    existing directory (or a name ending in /) is the caller's to fill with a default
    name. Raises ParameterError for a wrong type, a name ending in / that is no
    directory, OutputError (3) naming the parameter for an unusable path."""
    from bundler.core.errors import OutputError

    target = path(value, param)
    text_form = value if isinstance(value, str) else ""
    if text_form.endswith("/") and not target.is_dir():
        raise ParameterError(
            param, "no such directory (a path ending in / names one)", value=text_form
        )
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        if not target.parent.is_dir():
            raise OutputError(
                f"{param}: {target}: its directory {target.parent} does not exist", param=param
            ) from None
        return target
    except OSError as exc:
        raise OutputError(f"{param}: {target}: cannot use ({exc.strerror})", param=param) from exc
    if stat.S_ISDIR(info.st_mode):
        return target
    if stat.S_ISREG(info.st_mode) and existing_file_ok:
        return target
    what = "already exists" if stat.S_ISREG(info.st_mode) else "exists and is not a regular file"
    raise OutputError(
        f"{param}: {target}: {what}; an output is never written over anything", param=param
    )


def local_directory(value: object, param: str) -> Path:
    """A local directory to read (a run, a project): a URL is refused as given, a
    missing path, a file or a FIFO naming the parameter (InputError)."""
    where = path(value, param)
    existing_input(where, param)
    if not where.is_dir():
        raise InputError(f"{param}: {where}: not a directory", param=param)
    return where


def input_directory(value: object, param: str) -> str:
    """A directory to read (a store root, a run, a project, an archive), or an ``s3://``
    URL: a missing path, a file or a FIFO is refused naming the parameter (InputError)."""
    where = location(value, param)
    if not where.startswith("s3://"):
        existing_input(Path(where), param)
        if not Path(where).is_dir():
            raise InputError(f"{param}: {where}: not a directory", param=param)
    return where


@contextmanager
def reading(param: str, *, output: str | None = None) -> Iterator[None]:
    """Errors while reading ``param``'s input name it first (docs/library.md: an
    unreadable input is an InputError naming the parameter and the file; a stored
    object that is not there a ``NotFound``, exit 3, never a StorageError); an output
    that cannot be written names ``output``. Only an input error that names no
    parameter yet is touched; its class, exit code and the file it names stay as they
    were (``bare_message`` keeps the message as written)."""
    from bundler.core.errors import NotFound, OutputError, StorageError

    try:
        yield
    except StorageError as exc:
        if exc.kind != "not_found":
            raise
        # An item not found is the input's trouble (exit 3), not the service's.
        missing = NotFound(f"{param}: {exc.message}", param=param)
        missing.bare_message = exc.message
        raise missing from exc
    except InputError as exc:
        if exc.param is None:
            name = output if output is not None and isinstance(exc, OutputError) else param
            exc.bare_message = exc.message
            exc.message = f"{name}: {exc.message}"
            exc.args = (exc.message,)
            exc.param = name
        raise


def stored_object(where: str, param: str) -> str:
    """A bundle location that, as an ``s3://`` URL, names one object: a URL naming a
    bucket or a prefix (``s3://bucket/``) is refused (SPEC 6)."""
    if where.startswith("s3://"):
        from bundler import storage

        try:
            storage.stored_bundle_location(where)
        except BundlerError as exc:
            raise ParameterError(param, exc.message) from exc
    return where
