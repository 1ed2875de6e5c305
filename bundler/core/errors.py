"""One exception hierarchy; each class carries the exit code of SPEC section 8.

Messages are one line and name the file or member and the rule broken. The CLI's
entry point is the only place that turns these into exit codes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Self


@dataclass(frozen=True)
class Named:
    """A library parameter a message names inside its text: the library shows the
    parameter's name, the command line the option that carries it (``spelled``)."""

    param: str


class BundlerError(Exception):
    """Base of every error the toolkit raises on purpose."""

    exit_code = 3
    # The library parameter the error concerns, when it concerns one: the message then
    # begins with its name, and ``relabel`` gives it under another (a command's option).
    param: str | None = None
    # The message as the implementation wrote it (naming a file), before the library
    # put the parameter's name in front (``bundler.api.params.reading``); the command
    # line, whose own argument is that file, shows this one.
    bare_message: str | None = None

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if param is not None:
            self.param = param

    def __str__(self) -> str:
        return self.message

    # The message in parts when it names parameters inside its text (``naming``).
    parts: tuple[str | Named, ...] | None = None

    @classmethod
    def naming(cls, *parts: str | Named) -> Self:
        """An error whose message names parameters inside its text: each ``Named`` part
        reads as the parameter's name here, as its option on the command line."""
        exc = cls("".join(p if isinstance(p, str) else p.param for p in parts))
        exc.parts = parts
        return exc

    def spelled(self, label: Callable[[str], str | None]) -> str:
        """The message with each parameter it names inside its text given by ``label``
        (None keeps the parameter's name)."""
        if self.parts is None:
            return self.message
        return "".join(p if isinstance(p, str) else (label(p.param) or p.param) for p in self.parts)

    def relabel(self, label: str) -> str:
        """The message with ``label`` in place of the parameter's name it begins with."""
        if self.param is not None and self.message.startswith(self.param):
            return label + self.message[len(self.param) :]
        return self.message


class UsageError(BundlerError):
    """Bad options or arguments (exit 2)."""

    exit_code = 2


class ParameterError(UsageError):
    """A bad value for one parameter (exit 2): the wrong type, a naive time, an empty path.

    ``param`` is the name the library gives it (``exported_at``); the message begins with
    it, so a library caller reads which argument was wrong. The command line shows the
    same error under the option that carries the parameter (``--exported-at``):
    ``relabel`` gives that message, and ``bundler.cli.app.main`` is the one place that
    asks for it.
    """

    def __init__(self, param: str, rule: str, *, value: str | None = None) -> None:
        self.rule = rule
        self.value = value
        shown_value = "" if value is None else f" {value!r}"
        super().__init__(f"{param}{shown_value}: {rule}", param=param)


class InputError(BundlerError):
    """Unreadable, unsafe or malformed input; item not found (exit 3)."""

    exit_code = 3


class NotFound(InputError):
    """An item not found (exit 3, SPEC 8): a stored object the service says is not there.

    Storage reports it as a ``StorageError`` of kind ``not_found`` (a retrying caller
    reads ``kind``); the library gives it to its caller as this class, its message
    beginning with the parameter that named the item (``bundle: s3://...``): a
    ``StorageError`` from the library is always the service's failure (exit 5)."""

    kind = "not_found"


class CanonicalJSONError(InputError):
    """A document JCS cannot represent, or bytes that are not valid JSON."""


class DigestError(InputError):
    """A malformed digest string."""


class SchemaError(InputError):
    """A document that breaks its JSON Schema."""


class StoreError(InputError):
    """A store file that breaks the store rules (SPEC section 3)."""


class ArchiveError(InputError):
    """An archive that is unreadable, unsafe or malformed (SPEC sections 4.1 and 5)."""


class OutputError(InputError):
    """An output path that cannot be written safely (exists, symlink, missing parent)."""


class StrictFailure(BundlerError):
    """`--strict` found something that would be unavailable (exit 1)."""

    exit_code = 1


class PermissionDenied(BundlerError):
    """The principal lacks `report.export` or is unknown (exit 4)."""

    exit_code = 4


class StorageError(BundlerError):
    """Object storage unreachable, refused, or returned bytes that do not check (exit 5).

    ``kind`` says what a caller that retries needs to know: ``transient`` (throttled,
    a 5xx answer, a connection refused, reset or timed out: the same request may work
    later), ``not_found`` (no such object), ``unverifiable`` (the object has no valid
    ``sha256`` metadata) or ``refused`` (anything else: denied, bad credentials, no
    such bucket; retrying will not help).

    A missing object is an item not found, exit 3 (SPEC 8): the service answered, the
    input is not there. Every other kind is the service's failure, exit 5. The code is
    decided here, from ``kind``, so every command and the library agree.
    """

    exit_code = 5

    def __init__(self, message: str, *, kind: str = "refused") -> None:
        super().__init__(message)
        self.kind = kind
        if kind == "not_found":
            self.exit_code = 3  # a subclass's own code (altered at rest: 1) stays otherwise

    @property
    def transient(self) -> bool:
        return self.kind == "transient"


class VerificationFailed(BundlerError):
    """A bundle that was read but does not verify: a claim failed (exit 1, SPEC 8).

    Raised by commands that act only on a verified bundle (`prove`, and for reuse by
    `sign`, `upload`, `extract`, `audit`), so a tampered bundle exits 1 as `verify` does;
    a bundle that cannot be read at all stays an InputError (exit 3).
    """

    exit_code = 1
