"""Extracting a bundle of either kind while verifying it (``extract``).

``extract_bundle`` writes the bag beneath one directory descriptor as it is read
(``bundler.archive.safe_extract`` through the bag reader's ``Extractor``), verifies it
with ``bundler.bundles.verify.verify_contents``, and keeps the copy only when the
verdict is ``verified``; otherwise everything written is removed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from bundler.archive.bag_reader import Extractor, open_members, read_bag
from bundler.archive.reader import ArchiveTap
from bundler.bundles.verify import (
    archive_after_error,
    archive_facts,
    files_progress,
    verify_contents,
    with_stored,
)
from bundler.core.claims import Verdict, Verification, VerifyOptions
from bundler.core.errors import BundlerError, OutputError, StorageError
from bundler.core.outputs import prepare_output_dir


def extract_bundle(
    location: str,
    destination: Path,
    options: VerifyOptions,
    *,
    stream: BinaryIO | None = None,
    progress: Callable[[int], None] | None = None,
) -> Verification:
    """Verify while extracting into ``destination`` (absent or empty, not a symlink).

    Writes only regular files and directories, each created exclusively beneath the
    one descriptor of ``destination`` without following links (bundler.archive.safe_extract),
    with the modes 0666 / 0777 less the umask; unless the verdict is ``verified``,
    everything written (and ``destination`` itself, if this call created it) is removed.
    Raises OutputError when ``destination`` is unusable, when a write fails, or when
    another process replaced or planted an entry beneath it while extracting.
    """
    created = not destination.exists() and not destination.is_symlink()
    prepare_output_dir(destination)
    extractor = Extractor(destination, created=created)
    tap = ArchiveTap(progress)
    options = with_stored(options, stream)
    try:
        members = open_members(location, max_bytes=options.max_bytes, stream=stream, tap=tap)
        contents = read_bag(
            members, source=location, extract=extractor, progress=files_progress(tap, progress)
        )
        result = replace(verify_contents(contents, options), archive=archive_facts(tap))
        if result.verdict is Verdict.VERIFIED:
            extractor.check_intact()
    except StorageError:
        _clean(extractor)
        raise
    except OutputError as exc:
        # The extracted copy was raced by another process: the bundle was not judged, and
        # what was written is removed without following any link; what that process
        # moved out of reach or put entries into is left, and the message says so.
        left = _clean(extractor)
        if not left:
            raise
        raise OutputError(
            f"{exc.message}; {len(left)} created entries that process moved or added to "
            f"were left, e.g. {destination if left[0] == '.' else destination / left[0]}"
        ) from exc
    except BundlerError as exc:
        result = Verification(
            source=location,
            verdict=Verdict.ERROR,
            error=exc.message,
            strict=options.strict,
            archive=archive_after_error(tap),
        )
    except OSError as exc:
        # Archive reads raise ArchiveError; an OSError here is writing the copy (disk
        # full, file size limit): the bundle was not judged, the copy is removed.
        _clean(extractor)
        reason = exc.strerror or str(exc)
        raise OutputError(f"{destination}: cannot write the extracted bag ({reason})") from exc
    except BaseException:
        _clean(extractor)
        raise
    if result.verdict is Verdict.VERIFIED:
        extractor.close()
    else:
        _clean(extractor)
    return result


def _clean(extractor: Extractor) -> list[str]:
    """Remove what ``extractor`` wrote; the created entries that could not be reached."""
    return extractor.remove_all()
