"""Verifying a bundle of either kind (SPEC section 5): read it once, then dispatch.

``verify_bundle`` and ``read_and_verify`` read an archive, a bag directory or an open
archive stream through the safe bag reader (``bundler.archive.bag_reader``), load
bundle.json (``load_bundle``: parsed and schema-valid, or no verdict), and
``verify_contents`` calls the verifier its schema names: the EvalBook one
(``bundler.evalbook.verify``) or the eval-banana one (``bundler.evalbanana.verify``),
then adds the signature claim, applies ``--strict`` and decides the verdict.
``read_verified`` is for commands that act only on a bundle that verifies. Each raises
only when no verdict is possible.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from bundler.archive.bag_reader import BagContents, open_members, read_bag
from bundler.archive.reader import ArchiveTap
from bundler.bundles.stored import stored_claims, stored_of
from bundler.core import canonical, schemas
from bundler.core.claims import (
    Anchor,
    ArchiveFacts,
    Claim,
    State,
    Verdict,
    Verification,
    VerifyOptions,
    apply_strict,
)
from bundler.core.errors import (
    ArchiveError,
    BundlerError,
    CanonicalJSONError,
    InputError,
    Named,
    SchemaError,
    StorageError,
    VerificationFailed,
)
from bundler.core.signatures import SignatureCheck, SignatureSource
from bundler.evalbook.contract import BUNDLE_SCHEMA
from bundler.evalbook.verify import verify_evalbook_bundle
from bundler.trust.head import HEAD_FILE, HEAD_SIG_FILE
from bundler.trust.signatures import signature_claims


def archive_facts(tap: ArchiveTap) -> ArchiveFacts | None:
    """What ``tap`` read, once it read a whole archive; None for a bag directory."""
    if not tap.attached or not tap.complete:
        return None
    return ArchiveFacts(tap.sha256, tap.size)


def archive_after_error(tap: ArchiveTap) -> ArchiveFacts | None:
    """The archive's facts when no verdict was possible: the rest is read, if it can be.

    A StorageError (an object altered at rest shows at its end) propagates.
    """
    if tap.attached and not tap.complete:
        tap.drain_if_readable()
    return archive_facts(tap)


# ------------------------------------------------------------------------------ entry


def verify_bundle(
    location: str,
    options: VerifyOptions,
    *,
    stream: BinaryIO | None = None,
    progress: Callable[[int], None] | None = None,
) -> Verification:
    """Verify an archive, a bag directory or an open archive stream.

    Never raises for a bad bundle: an unsafe or unreadable archive or a malformed
    bundle.json gives verdict ``error`` with the one-line reason.
    """
    return read_and_verify(location, options, stream=stream, progress=progress)[0]


def read_and_verify(
    location: str,
    options: VerifyOptions,
    *,
    stream: BinaryIO | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[Verification, BagContents | None]:
    """Like ``verify_bundle``, also returning what was read (None on verdict error).

    ``progress`` receives a running count: of the archive's (compressed) bytes read,
    whose total is the archive's size; for a bag directory, of the file bytes read.
    The result names the archive read (``archive``: SHA-256 and size of the whole file).
    """
    tap = ArchiveTap(progress)
    options = with_stored(options, stream)
    try:
        members = open_members(location, max_bytes=options.max_bytes, stream=stream, tap=tap)
        contents = read_bag(members, source=location, progress=files_progress(tap, progress))
        result = verify_contents(contents, options)
        return replace(result, archive=archive_facts(tap)), contents
    except StorageError:
        raise  # the bucket, not the bundle, failed: exit 5, not a verdict
    except BundlerError as exc:
        return Verification(
            source=location,
            verdict=Verdict.ERROR,
            error=exc.message,
            strict=options.strict,
            archive=archive_after_error(tap),
        ), None


def with_stored(options: VerifyOptions, stream: BinaryIO | None) -> VerifyOptions:
    """``options`` naming the stored object ``stream`` reads (its key must name the
    bundle), unless they name one already."""
    if options.stored is not None or stream is None:
        return options
    stored = stored_of(stream)
    return options if stored is None else replace(options, stored=stored)


def files_progress(
    tap: ArchiveTap, progress: Callable[[int], None] | None
) -> Callable[[int], None] | None:
    """The file-bytes count for a bag directory; an archive's tap reports its own bytes."""
    if progress is None:
        return None

    def on_files(done: int) -> None:
        if not tap.attached:
            progress(done)

    return on_files


def read_verified(
    location: str, options: VerifyOptions, *, action: str, stream: BinaryIO | None = None
) -> tuple[Verification, BagContents]:
    """Read and verify; raise unless the verdict is ``verified``.

    For commands that must not act on a bundle that does not verify (sign, prove,
    upload): VerificationFailed (exit 1) when a claim failed, InputError (exit 3) when
    the bundle cannot be read at all (SPEC 8); the message carries the error or the
    first failed claims.
    """
    result, contents = read_and_verify(location, options, stream=stream)
    if result.verdict is Verdict.ERROR or contents is None:
        raise InputError(
            f"{location}: cannot be read as a bundle ({result.error}); refusing to {action}"
        )
    if result.verdict is not Verdict.VERIFIED:
        raise not_verified(location, result, action)
    return result, contents


# The anchors a failed claim's text names by their options (the claims are the record's,
# shared by both verifiers and the command line): in a refusal raised to a caller they
# are parameters, which the command line spells back as options (BundlerError.naming).
_ANCHOR_OPTIONS = re.compile(
    r"--(expect-bundle-digest|expect-report-digest|allowed-signers|identity)\b"
)


def not_verified(location: str, result: Verification, action: str) -> VerificationFailed:
    """The one refusal of a command that acts only on a verified bundle, when claims
    failed (exit 1), its text kept raw (escaped once, where it is shown): the first
    three failed claims, each anchor named as the caller's
    parameter (``expect_bundle_digest`` from the library, ``--expect-bundle-digest``
    on the command line)."""
    detail = "; ".join(f"{c.subject}: {c.detail}" for c in result.failures()[:3])
    parts: list[str | Named] = [f"{location}: bundle does not verify ("]
    at = 0
    for match in _ANCHOR_OPTIONS.finditer(detail):
        parts += [detail[at : match.start()], Named(match.group(1).replace("-", "_"))]
        at = match.end()
    parts.append(f"{detail[at:]}); refusing to {action}")
    return VerificationFailed.naming(*parts)


def verify_contents(contents: BagContents, options: VerifyOptions) -> Verification:
    """Check the claims over a bag already read. Raises BundlerError when no verdict is possible."""
    bundle = load_bundle(contents)
    if bundle.get("schema") == BUNDLE_SCHEMA:
        claims, facts = verify_evalbook_bundle(contents, bundle, options)
    else:  # eval-banana bundles (SPEC section 10.2)
        # Imported here: the eval-banana side (its runner, definitions and exporter) is
        # about a sixth of the start-up of verifying an EvalBook bundle, which never needs it.
        from bundler.evalbanana.verify import verify_eb_bundle

        claims, facts = verify_eb_bundle(contents, bundle, options)
    anchor, signer_claims, checks = _anchor_claims(contents, bundle, options)
    claims.items.extend(signer_claims)
    if options.stored is not None:
        claims.items.extend(
            stored_claims(options.stored, facts["report_id"], facts["bundle_digest"])
        )
    final = apply_strict(claims.items, options.strict)
    verdict = Verdict.FAILED if any(c.state is State.FAILED for c in final) else Verdict.VERIFIED
    return Verification(
        source=contents.source,
        verdict=verdict,
        kind=bundle["schema"],
        bundle_digest=facts["bundle_digest"],
        report_id=facts["report_id"],
        report_digest=facts["report_digest"],
        anchor=anchor,
        strict=options.strict,
        claims=tuple(final),
        summary=facts.get("summary", {}),
        report_result=facts.get("report_result"),
        report_issued_at=facts.get("report_issued_at"),
        envelope=facts.get("envelope"),
        signatures=checks,
    )


def missing_bundle_hint(source: str) -> str:
    """What a directory without data/bundle.json probably is, as "; hint" (or "")."""
    path = Path(source)
    if source.startswith("s3://") or not path.is_dir() or path.is_symlink():
        return ""
    try:
        children = sorted(path.iterdir())
    except OSError:
        return ""
    bags = [c for c in children if c.is_dir() and (c / "bagit.txt").is_file()]
    # extract writes the bag and, beside it, its signatures (<bag>.sig, <bag>.sig.<hex>).
    others = [c for c in children if c not in bags]
    if len(bags) == 1 and all(c.name.startswith(bags[0].name + ".sig") for c in others):
        return (
            f"; this directory holds the bag {bags[0].name}/ (what extract wrote): verify {bags[0]}"
        )
    if (path / "report.json").is_file():
        return (
            "; this looks like an eval-banana run directory: verify it in place with "
            "--project PROJECT_ROOT, or export it with export-eb"
        )
    if (path / "body.json").is_file() and (path / "envelope.json").is_file():
        return (
            "; this looks like a report directory of a store: export it first with "
            f"export --store STORE_ROOT --report {path.name}"
        )
    return ""


def load_bundle(contents: BagContents) -> dict[str, Any]:
    """bundle.json parsed and schema-valid, or ArchiveError (verdict error)."""
    data = contents.kept.get("data/bundle.json")
    where = f"{contents.source}: data/bundle.json"
    if data is None:
        raise ArchiveError(
            f"{where}: missing (no verdict possible){missing_bundle_hint(contents.source)}"
        )
    try:
        value = canonical.loads(data, source=where)
    except CanonicalJSONError as exc:
        raise ArchiveError(f"malformed bundle.json: {exc.message}") from exc
    if not isinstance(value, dict):
        raise ArchiveError(f"{where}: not a JSON object")
    schema_name = {
        BUNDLE_SCHEMA: "bundle",
        "evalbook.eval_banana_bundle.v1": "eb-bundle",
    }.get(value.get("schema"))  # type: ignore[arg-type]
    if schema_name is None:
        raise ArchiveError(f"{where}: unknown bundle schema {value.get('schema')!r}")
    try:
        schemas.validate(schema_name, value, source=where)
    except SchemaError as exc:
        raise ArchiveError(f"malformed bundle.json: {exc.message}") from exc
    return value


def _anchor_claims(
    contents: BagContents, bundle: dict[str, Any], options: VerifyOptions
) -> tuple[Anchor, list[Claim], tuple[SignatureCheck, ...]]:
    """Every signature present, checked (SPEC 11.3), and the anchor the result states."""
    sources = list(options.sidecars)
    embedded = contents.kept.get(HEAD_SIG_FILE)
    if embedded is not None:
        text = embedded.decode("utf-8", "replace")
        sources.insert(0, SignatureSource(HEAD_SIG_FILE, text, embedded=True))
    checks, claims, signer, keys = signature_claims(
        contents.kept.get(HEAD_FILE),
        sources,
        allowed=options.allowed_signers,
        identity=options.identity,
    )
    anchor = Anchor(options.expect_bundle_digest, options.expect_report_digest, signer, keys)
    return anchor, claims, checks
