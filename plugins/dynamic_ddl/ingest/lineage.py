"""Back from a raw row to its original line: the inbox is the raw archive.

A raw, child or quarantine row names its line by `_source_file` and
`_line_number`. The ledger holds, per file and batch, the checksum and size
of the file as that batch read it, and which of its lines it took. Before a
line is read, the file is checked against that checksum (its first `size`
bytes: appending to a file changes none of its earlier lines), so a file
changed or removed since is reported, never guessed at.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from dynamic_ddl.ingest.ledger import COMMITTED, LedgerEntry, fingerprint

_CHUNK = 1 << 20
_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")


class LineageError(LookupError):
    """A line cannot be fetched from the inbox; says why and what would have kept it."""


def covering_entry(
    entries: Iterable[LedgerEntry], path: str, line_number: int, batch_id: str | None = None
) -> LedgerEntry:
    """The committed ledger entry of `path` whose batch took line `line_number`.

    A file that grew is in several entries, each for the lines it added
    (`first_line` .. `first_line + line_count - 1`); `batch_id` (the row's
    `_batch_id`) picks one when given.
    """
    candidates = [
        e
        for e in entries
        if e.path == path
        and e.state == COMMITTED
        and (batch_id is None or e.batch_id == batch_id)
        and e.first_line <= line_number < e.first_line + e.line_count
    ]
    if not candidates:
        raise LineageError(
            f"No committed batch took line {line_number} of {path}"
            + (f" in batch {batch_id}" if batch_id else "")
            + ": check the row's _source_file, _line_number and _batch_id."
        )
    return max(candidates, key=lambda e: e.size)


def check_unchanged(path: Path, entry: LedgerEntry) -> None:
    """Raise LineageError unless the file's first `entry.size` bytes are what its batch read."""
    if not path.is_file():
        raise LineageError(
            f"{path} was removed from the inbox after batch {entry.batch_id} read it: the "
            "original line is gone. Keep inbox files as long as lineage is wanted, or set "
            "keep_raw_json: true on the topic to copy lines into the raw table."
        )
    size = path.stat().st_size
    facts = fingerprint(path, entry.size if size > entry.size else None)
    read = facts.prefix_checksum if size > entry.size else facts.checksum
    if size < entry.size or read != entry.checksum:
        raise LineageError(
            f"{path} changed after batch {entry.batch_id} read it (checksum differs from the "
            "ledger's): its lines may not be the ones ingested. Restore the file from a backup "
            "to fetch the original."
        )


def _decoded_chunks(path: Path) -> Iterator[bytes]:
    """The file's bytes, gunzipped for `.gz` files (concatenated members too)."""
    unzip = zlib.decompressobj(wbits=47) if path.name.endswith(".gz") else None
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            if unzip is None:
                yield chunk
                continue
            text = unzip.decompress(chunk)
            while unzip.eof and unzip.unused_data:
                rest = unzip.unused_data
                unzip = zlib.decompressobj(wbits=47)
                text += unzip.decompress(rest)
            yield text


def split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    r"""Lines as Spark's text reader splits them: at LF, CRLF or a bare CR.

    A byte-order mark at the start is not part of the first line.

    Example:
        >>> list(split_lines([b"\xef\xbb\xbfa\r", b"\nb\rc\n", b"\n"]))
        [b'a', b'b', b'c', b'']
    """
    pending, first = b"", True
    for chunk in chunks:
        data = pending + chunk
        if first:
            data, first = data.removeprefix(_BOM), False
        start = 0
        for end in _LINE_END.finditer(data):
            if end.group() == b"\r" and end.end() == len(data):
                break  # perhaps the CR of a CRLF the next chunk completes
            yield data[start : end.start()]
            start = end.end()
        pending = data[start:]
    if pending:
        yield pending.removesuffix(b"\r")


def read_line(path: Path, line_number: int) -> bytes:
    """Line `line_number` (1-based) of the file, without its line end."""
    for number, line in enumerate(split_lines(_decoded_chunks(path)), start=1):
        if number == line_number:
            return line
    raise LineageError(f"{path} has fewer than {line_number} lines.")


def original_line(
    entries: Iterable[LedgerEntry], source_file: str, line_number: int, batch_id: str | None = None
) -> bytes:
    """The original bytes of a raw row's line, after checking its file against the ledger."""
    entry = covering_entry(entries, source_file, line_number, batch_id)
    path = Path(source_file)
    check_unchanged(path, entry)
    return read_line(path, line_number)
