"""Back from a raw row to its original line: the inbox is the raw archive.

A raw, child or quarantine row names its line by `_source_file` and
`_line_number`. The ledger holds, per file and batch, the checksum and size
of the file as that batch read it, and which of its lines it took. Before a
line is read, the file's first `size` bytes are checked against that
checksum, and the line is read from those bytes only (a later append is
not what the batch read), so a file changed or removed since is reported,
never guessed at; unless the version went on in a file the ledger followed
(renamed, moved or rotated), which is then read, checked the same way.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from dynamic_ddl.catalog import Sql
from dynamic_ddl.ingest.bookkeeping import (
    BookkeepingTables,
    ledger_rows_of_continued_files_sql,
    ledger_rows_of_file_sql,
    read_ledger_unlocked,
)
from dynamic_ddl.ingest.ledger import BOM, CHUNK_BYTES, COMMITTED, Gunzip, LedgerEntry

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
    if len({e.batch_id for e in candidates}) > 1:
        # A file rewritten, or grown without a line end at its end, is read anew:
        # several batches took a line of this number, perhaps not the same line.
        batches = ", ".join(sorted({e.batch_id for e in candidates}))
        raise LineageError(
            f"Line {line_number} of {path} was taken by batches {batches}: pass the row's "
            "_batch_id as batch_id."
        )
    return candidates[0]


def check_unchanged(path: Path, entry: LedgerEntry) -> None:
    """Raise LineageError unless the file's first `entry.size` bytes are what its batch read."""
    if not path.is_file():
        raise LineageError(
            f"{path} was removed from the inbox after batch {entry.batch_id} read it, and no"
            " file it was renamed or rotated to holds it: the original line is gone. Keep"
            " inbox files as long as lineage is wanted, or set keep_raw_json: true on the"
            " topic to copy lines into the raw table."
        )
    if path.stat().st_size < entry.size or _checksum(path, entry.size) != entry.checksum:
        raise LineageError(
            f"{path} changed after batch {entry.batch_id} read it (checksum differs from the"
            " ledger's, and no file it was rotated to holds it): its lines may not be the ones"
            " ingested. Restore the file from a backup to fetch the original."
        )


def _raw_chunks(path: Path, size: int) -> Iterator[bytes]:
    """The file's first `size` bytes (what its batch read: a later append is not read)."""
    left = size
    with open(path, "rb") as handle:
        while left > 0 and (chunk := handle.read(min(CHUNK_BYTES, left))):
            left -= len(chunk)
            yield chunk


def decoded_chunks(path: Path, size: int) -> Iterator[bytes]:
    """The first `size` bytes of the file, gunzipped for `.gz` files (all members)."""
    unzip = Gunzip() if path.name.endswith(".gz") else None
    for chunk in _raw_chunks(path, size):
        yield chunk if unzip is None else unzip.feed(chunk)


def split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    r"""Lines as Spark's text reader splits them: at LF, CRLF or a bare CR.

    A byte-order mark at the start is not part of the first line. Each chunk
    is searched once, so a very long line costs no more than its length.

    Example:
        >>> list(split_lines([b"\xef\xbb", b"\xbfa\r", b"\nb\rc\n", b"\n"]))
        [b'a', b'b', b'c', b'']
    """
    parts: list[bytes] = []  # the line so far, from earlier chunks
    after_cr = False
    for chunk in without_bom(chunks):
        if not chunk:  # gunzipping may give nothing for a while: a CR stays pending
            continue
        start = 1 if after_cr and chunk.startswith(b"\n") else 0  # the LF of a split CRLF
        for end in _LINE_END.finditer(chunk, start):
            yield b"".join([*parts, chunk[start : end.start()]])
            parts, start = [], end.end()
        after_cr = chunk.endswith(b"\r") and start == len(chunk)
        parts.append(chunk[start:])
    if any(parts):
        yield b"".join(parts)


def without_bom(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks without a byte-order mark at the start (even one split across chunks)."""
    head = b""
    chunks = iter(chunks)
    for chunk in chunks:
        head += chunk
        if len(head) >= len(BOM):
            break
    if head:
        yield head.removeprefix(BOM)
    yield from chunks


def read_line(path: Path, line_number: int, size: int | None = None) -> bytes:
    """Line `line_number` (1-based) of the file's first `size` bytes (all of them when
    None), without its line end."""
    size = path.stat().st_size if size is None else size
    for number, line in enumerate(split_lines(decoded_chunks(path, size)), start=1):
        if number == line_number:
            return line
    raise LineageError(f"{path} has fewer than {line_number} lines.")


def original_line(
    entries: Iterable[LedgerEntry],
    source_file: str,
    line_number: int,
    batch_id: str | None = None,
    moved_candidates: Callable[[], Iterable[LedgerEntry]] | None = None,
) -> bytes:
    """The original bytes of a raw row's line, after checking its file against the ledger.

    `entries`: the ledger's entries of the file at least; `moved_candidates`, when
    given, those to find the file's version in when it moved (moved_to), read only
    then (all of `entries` when None).
    """
    entries = list(entries)
    entry = covering_entry(entries, source_file, line_number, batch_id)
    path = Path(source_file)
    try:
        check_unchanged(path, entry)
    except LineageError:
        path = moved_to(entries if moved_candidates is None else moved_candidates(), entry)
        if path is None:
            raise
    return read_line(path, line_number, entry.size)


def original_line_in_ledger(
    sql: Sql, schema: str, source_file: str, line_number: int, batch_id: str | None = None
) -> bytes:
    """original_line against the ledger of `schema` (as `dbt run-operation original_line`
    runs it): the file's entries, then, only if the file moved, those of the files that
    continued another (found by review: only the file's own were read, so a moved one
    was never found)."""
    tables = BookkeepingTables.in_schema(schema)
    return original_line(
        read_ledger_unlocked(
            sql, tables, lambda every: ledger_rows_of_file_sql(every, source_file)
        ),
        source_file,
        line_number,
        batch_id,
        lambda: read_ledger_unlocked(sql, tables, ledger_rows_of_continued_files_sql),
    )


def moved_to(entries: Iterable[LedgerEntry], entry: LedgerEntry) -> Path | None:
    """The file `entry`'s version went on in, when its own path is gone or holds other
    bytes: another path the ledger took from past its first line (renamed, moved or
    rotated, ledger.moved_from) that still starts with the version's bytes; None when
    none does (found by review: a row taken before its file moved was reported lost)."""
    continued = {}  # path -> whether its first committed entry continued another file
    for e in sorted(entries, key=lambda e: e.batch_id):
        if e.state == COMMITTED and e.path != entry.path:
            continued.setdefault(e.path, e.first_line > 1)
    zipped = entry.path.endswith(".gz")
    for name in sorted(p for p, moved in continued.items() if moved):
        path = Path(name)
        if name.endswith(".gz") != zipped or not path.is_file():
            continue
        if path.stat().st_size >= entry.size and _checksum(path, entry.size) == entry.checksum:
            return path
    return None


def _checksum(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    for chunk in _raw_chunks(path, size):
        digest.update(chunk)
    return digest.hexdigest()
