"""Upload and download judge a stored object by the bundle its bytes hold (SPEC 6), by
verifying them: "already archived" only when the bytes at the key verify as this
bundle, a download placed only when the key names the bundle it holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bundler.bundles.stored import KEY_SUBJECT, bundle_stream, verified_stored
from bundler.core.claims import StoredObject


def existing_bundle(endpoint_url: str | None) -> Callable[[str], str | None]:
    """For upload: the bundle digest the bytes already at a key verify to (None when
    they do not verify), so that "already archived" rests on bytes, not metadata."""

    def check(url: str) -> str | None:
        from bundler.bundles.verify import read_and_verify
        from bundler.core.claims import Verdict, VerifyOptions

        with bundle_stream(url, endpoint_url) as stream:
            result, _ = read_and_verify(url, VerifyOptions(), stream=stream)
            if stream is not None:
                verified_stored(url, stream, result)
        return result.bundle_digest if result.verdict is Verdict.VERIFIED else None

    return check


def judge_download(url: str, verified: dict[str, Any]) -> Callable[[Path, str | None], None]:
    """For download: the bytes are placed only when the bundle they hold is the one the
    key names (SPEC 6), and, for an object without sha256 metadata (nothing recorded to
    compare), only when they verify. ``verified`` receives the bundle facts read from
    the bytes, which replace what the metadata says."""

    def accept(path: Path, recorded: str | None) -> None:
        from bundler.bundles.verify import read_and_verify
        from bundler.core.claims import Verdict, VerifyOptions
        from bundler.core.errors import InputError, VerificationFailed

        options = VerifyOptions(stored=StoredObject(url, recorded))
        result, _ = read_and_verify(str(path), options)
        if result.verdict is Verdict.ERROR:
            if recorded is None:
                raise InputError(f"{url}: cannot be read as a bundle ({result.error})")
            return  # the recorded bytes arrived; what they hold is verify's to say
        failed = [c for c in result.failures() if c.subject == KEY_SUBJECT]
        if failed or (recorded is None and result.verdict is not Verdict.VERIFIED):
            detail = "; ".join(str(c.detail) for c in (failed or result.failures())[:3])
            raise VerificationFailed(f"{url}: {detail}; nothing downloaded")
        verified.update(
            bundle_digest=result.bundle_digest,
            report_id=result.report_id,
            report_digest=result.report_digest,
        )

    return accept
