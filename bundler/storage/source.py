"""An EvalBook store root in a bucket, read through ``S3StoreSource`` (SPEC section 3).

The store reader (``bundler.evalbook.store``) reads files, opens streams and lists
directories through it as it does through a local directory.
"""

from __future__ import annotations

import io
from typing import BinaryIO

import botocore.exceptions as bexc

from bundler.core.errors import StoreError
from bundler.storage.config import MiB, StorageConfig, _Conn, _connect
from bundler.storage.layout import S3Location, _normalise_prefix, parse_s3_url
from bundler.storage.objects import _get, _open_reader


class S3StoreSource:
    """Read access to an EvalBook store root at ``s3://bucket/prefix`` (SPEC section 3).

    Relative paths are POSIX paths the caller has validated. Absent files are None;
    transport and permission failures are StorageError; a file over the caller's size
    limit is StoreError.
    """

    def __init__(self, root: S3Location, *, config: StorageConfig | None = None) -> None:
        self.root = S3Location(root.bucket, _normalise_prefix(root.key))
        self.config = config or StorageConfig()
        self._conn: _Conn | None = None

    @classmethod
    def from_url(cls, url: str, *, config: StorageConfig | None = None) -> S3StoreSource:
        """A source for ``s3://bucket/prefix``; UsageError for a malformed URL."""
        return cls(parse_s3_url(url), config=config)

    @property
    def conn(self) -> _Conn:
        if self._conn is None:
            self._conn = _connect(self.config)
        return self._conn

    def _loc(self, relpath: str) -> S3Location:
        return self.root.child(relpath)

    def describe(self, relpath: str) -> str:
        return self._loc(relpath).url

    def read_bytes(self, relpath: str, *, max_size: int) -> bytes | None:
        """The whole object, or None when absent; StoreError when over ``max_size``."""
        loc = self._loc(relpath)
        answer = _get(self.conn, loc, "reading", checksum_mode=True)
        if answer is None:
            return None
        size = int(answer.get("ContentLength", 0))
        with _open_reader(self.conn, loc, answer, None) as reader:
            if size > max_size:
                raise StoreError(f"{loc.url}: larger than {max_size} bytes")
            # The reader refuses more bytes than the declared size.
            data = reader.readall()
        return data

    def open_stream(self, relpath: str) -> tuple[BinaryIO, int] | None:
        """A buffered stream of the object and its size, or None when absent."""
        loc = self._loc(relpath)
        answer = _get(self.conn, loc, "reading", checksum_mode=True)
        if answer is None:
            return None
        size = int(answer.get("ContentLength", 0))
        raw = _open_reader(self.conn, loc, answer, None)
        return io.BufferedReader(raw, buffer_size=1 * MiB), size

    def list_names(self, reldir: str, *, limit: int) -> list[str]:
        """The names directly under ``reldir/`` (keys and common prefixes), in key order,
        each once: an object and a "directory" of the same name are one name (SPEC 6);
        empty when nothing is stored there. StoreError when there are more than
        ``limit``, StorageError when listing fails."""
        base = self._loc(reldir).key + "/"
        url = f"s3://{self.root.bucket}/{base}"
        paginator = self.conn.client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.root.bucket,
            Prefix=base,
            Delimiter="/",
            PaginationConfig={"PageSize": self.config.page_size},
        )
        names: list[str] = []
        seen: set[str] = set()
        try:
            for page in pages:
                found = [
                    str(p.get("Prefix", ""))[len(base) : -1] for p in page.get("CommonPrefixes", [])
                ]
                # A "directory marker" object at the prefix itself names nothing.
                found += [
                    str(o.get("Key", ""))[len(base) :]
                    for o in page.get("Contents", [])
                    if o.get("Key") != base
                ]
                for name in found:
                    if name in seen:
                        continue
                    seen.add(name)
                    if len(names) >= limit:
                        raise StoreError(f"{url}: more than {limit} entries")
                    names.append(name)
        except (bexc.ClientError, bexc.BotoCoreError) as exc:
            raise self.conn.fail(url, "listing", exc) from exc
        return sorted(names)
