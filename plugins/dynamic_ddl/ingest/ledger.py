"""Which inbox files are new: the pure logic of the file ledger.

A file is identified by its path and content checksum. A file already
committed is never ingested again; a file recorded as pending (a run that
was killed between writing and committing) is ingested again under the
batch id it was given, so a rerun rewrites exactly what the killed run
wrote. A path whose content changed after it was ingested is a new file.

A committed file whose size and modification time are unchanged is not
read at all, so a run with no new files reads no data. Every other file is
read once, here, for its checksum and its line count (the count the
ingestion must account for: raw rows + quarantined lines).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dynamic_ddl.ingest.topics import topic_files

PENDING = "pending"
COMMITTED = "committed"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class InboxFile:
    """A file in the inbox as found on disk."""

    path: str
    size: int
    mtime: float
    checksum: str
    line_count: int


@dataclass(frozen=True)
class LedgerEntry:
    """A ledger row: a file, the batch that took it, and whether that batch committed."""

    path: str
    size: int
    mtime: float
    checksum: str
    line_count: int
    batch_id: str
    state: str


@dataclass(frozen=True)
class Batch:
    """The files one run ingests: reruns of pending batches keep their ids."""

    batch_id: str
    files: tuple[InboxFile, ...]


def fingerprint(path: Path) -> tuple[str, int]:
    """SHA-256 of the file's bytes and its line count, in one read of 1 MiB chunks.

    Lines are counted as Spark's text reader splits them: at LF, CRLF or a
    bare CR, and a last line needs no line end (see count_line_ends); gzip
    files are counted on their decompressed bytes.
    """
    digest = hashlib.sha256()
    unzip = zlib.decompressobj(wbits=47) if path.name.endswith(".gz") else None
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            text = chunk
            if unzip is not None:
                text = unzip.decompress(chunk)
                while unzip.eof and unzip.unused_data:  # concatenated gzip members
                    rest = unzip.unused_data
                    unzip = zlib.decompressobj(wbits=47)
                    text += unzip.decompress(rest)
            if text:
                count += count_line_ends(text, after_cr=last == b"\r")
                last = text[-1:]
    return digest.hexdigest(), count + (last not in (b"\n", b"\r"))


def count_line_ends(text: bytes, after_cr: bool = False) -> int:
    r"""Line ends in `text` as Hadoop's LineReader finds them: LF, CRLF and a bare CR.

    `after_cr` says the text before this chunk ended in CR, so a leading LF
    completes that CRLF rather than ending a line of its own.

    Example:
        >>> count_line_ends(b"a\r\nb\rc\n"), count_line_ends(b"\nx", after_cr=True)
        (3, 0)
    """
    ends = text.count(b"\n") + text.count(b"\r") - text.count(b"\r\n")
    return ends - (after_cr and text.startswith(b"\n"))


def file_checksum(path: Path) -> str:
    """SHA-256 of the file's bytes."""
    return fingerprint(path)[0]


def count_lines(path: Path) -> int:
    """Lines as Spark's text reader splits them (see fingerprint)."""
    return fingerprint(path)[1]


def is_unchanged(path: Path, entry: LedgerEntry | None) -> bool:
    """Whether a committed ledger entry still describes the file (same size and mtime)."""
    if entry is None or entry.state != COMMITTED:
        return False
    stat = path.stat()
    return stat.st_size == entry.size and stat.st_mtime == entry.mtime


def scan_inbox(inbox: Path, topic: str, ledger: Iterable[LedgerEntry] = ()) -> list[InboxFile]:
    """The topic's files that are not committed unchanged, with checksum and line count."""
    committed = {e.path: e for e in ledger if e.state == COMMITTED}
    found = []
    for path in topic_files(inbox, topic):
        if is_unchanged(path, committed.get(str(path))):
            continue
        stat = path.stat()
        checksum, line_count = fingerprint(path)
        found.append(InboxFile(str(path), stat.st_size, stat.st_mtime, checksum, line_count))
    return found


def latest_entries(entries: Iterable[LedgerEntry]) -> dict[tuple[str, str], LedgerEntry]:
    """The last word on each (path, checksum): committed beats pending."""
    latest: dict[tuple[str, str], LedgerEntry] = {}
    for entry in entries:
        key = (entry.path, entry.checksum)
        if key not in latest or entry.state == COMMITTED:
            latest[key] = entry
    return latest


def new_batch_id(files: Iterable[InboxFile], now: datetime) -> str:
    """A sortable, unique batch id: UTC time plus a hash of the files it takes.

    Example:
        >>> from datetime import UTC
        >>> new_batch_id([], datetime(2026, 11, 21, 8, 30, tzinfo=UTC))
        '20261121T083000Z-e3b0c442'
    """
    digest = hashlib.sha256()
    for file in sorted(files, key=lambda f: f.path):
        digest.update(f"{file.path}\0{file.checksum}\n".encode())
    return f"{now:%Y%m%dT%H%M%SZ}-{digest.hexdigest()[:8]}"


def plan_batches(
    scanned: Iterable[InboxFile], ledger: Iterable[LedgerEntry], now: datetime
) -> list[Batch]:
    """Batches to ingest, oldest first: each pending batch again, then the new files.

    Returns an empty list when every file is committed: a run with no new
    files reads no data.
    """
    latest = latest_entries(ledger)
    pending: dict[str, list[InboxFile]] = {}
    fresh: list[InboxFile] = []
    for file in scanned:
        entry = latest.get((file.path, file.checksum))
        if entry is None:
            fresh.append(file)
        elif entry.state == PENDING:
            pending.setdefault(entry.batch_id, []).append(file)
    batches = [Batch(batch_id, tuple(files)) for batch_id, files in sorted(pending.items())]
    if fresh:
        batches.append(Batch(new_batch_id(fresh, now), tuple(fresh)))
    return batches
