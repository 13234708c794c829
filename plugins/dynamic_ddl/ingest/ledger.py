"""Which inbox files are new: the pure logic of the file ledger.

A file is identified by its path and content checksum. A file already
committed is never ingested again. A batch recorded as pending (a run that
was killed between writing and committing) is ingested again under its
own id, with its files as they are now (changed or gone since: the rerun
first drops what the killed run wrote, so nothing of it stays beside the
rerun, and a batch whose files are all gone leaves nothing). A path whose
content changed after it was committed is a new file.

A committed file whose size and modification time are unchanged is not
read at all, so a run with no new files reads no data. Every other file is
read once, here, for its checksum and its line count (the count the
ingestion must account for: raw rows + quarantined lines).

A file that grew by appending (its start is, byte for byte, the newest
committed version) is taken from its first new line on: `first_line` says
where, and `line_count` counts only the new lines. A version whose last line
had no line end yet (a producer caught mid-line) is followed too: when the
appended bytes start with a line end, that line was whole and is not taken
again; otherwise it was cut, and it is taken again whole (its fragment stays
where the earlier batch put it, most often in quarantine). A `.gz` file is
followed the same way when gzip members were appended to it (each member's
text read after the last's, as Hadoop reads them). Any other change makes
the file a new file, read whole. The newest version, not the largest, is the one a file grows
from: a file truncated and written again (logrotate's `copytruncate`) is
followed from its new start.

A file rotated (logrotate's `dateext`: `app.json` -> `app-20261128.json`, a
new `app.json` in its place) or renamed is known by its bytes and taken from
its first new line as if it had grown in place (moved_from). A copy made
while the original still holds its version is another file, read whole.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import zlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from dynamic_ddl.ingest.topics import topic_files

_LOG = logging.getLogger("dynamic_ddl.ingest")

PENDING = "pending"
COMMITTED = "committed"
CHUNK_BYTES = 1 << 20
# A byte-order mark: Hadoop's line reader skips it at the start of a file.
BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class InboxFile:
    """A file in the inbox as found on disk."""

    path: str
    size: int
    mtime: float
    checksum: str
    line_count: int
    # The first line to ingest (1-based): past the lines of a committed version it grew from.
    first_line: int = 1
    # Whether `""` occurs in the file (True when not known): only then can Spark's
    # inference have taken an empty string for null (parse.empty_strings_as_text).
    holds_empty_string: bool = True
    # Bytes of a last line without a line end yet (a producer caught mid-line), 0 when
    # none: the batch learns from Spark's read whether the line was finished since.
    cut_bytes: int = 0
    # Fingerprint.longest_line: past READ_LINE_LIMIT, Spark reads a copy of the file
    # whose longer lines are cut (inbox_links.copy_cutting_long_lines).
    longest_line: int = 0


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
    # When the entry took its state (UTC); None for an entry not written yet.
    recorded_at: datetime | None = None
    first_line: int = 1


@dataclass(frozen=True)
class BatchLimits:
    """A backlog is cut into batches of at most this many files and bytes (oldest path first)."""

    max_files: int = 10_000
    max_bytes: int = 2 << 30


@dataclass(frozen=True)
class Batch:
    """The files one run ingests: reruns of pending batches keep their ids."""

    batch_id: str
    files: tuple[InboxFile, ...]
    rerun: bool = False  # a batch a killed run left pending: what it wrote is dropped first


class Fingerprint(NamedTuple):
    """What one read of a file tells: checksum and lines, and the same of its first bytes."""

    checksum: str
    line_count: int
    prefix_checksum: str | None = None  # of the first `prefix_size` bytes, when asked
    prefix_lines: int = 0  # line ends in those bytes (in the text they decode to, for gzip)
    prefix_ends_line: bool = False  # whether those bytes end with a line end
    # Whether the byte right after them is a line end (their unterminated last line was
    # whole, only its line end came later).
    line_end_follows: bool = False
    holds_empty_string: bool = True  # whether `""` occurs in the (decoded) text
    cut_bytes: int = 0  # bytes of a last line with no line end (plain files only)
    # The bytes of the longest line, exact when more than READ_LINE_LIMIT (else at least
    # those of the lines that cross a read chunk's end).
    longest_line: int = 0
    # (size, checksum of the first `size` bytes) for each of the `other_sizes` asked.
    sized_checksums: tuple[tuple[int, str], ...] = ()
    # What the (decoded) text starts like when it is no UTF-8 JSON text: "UTF-16" (a
    # byte-order mark of it), "gzip" (compressed twice); "" otherwise.
    looks_like: str = ""


# The longest line Spark is given: Hadoop's reader holds a line whole in memory, and
# measured on a 1 GiB driver, a line of 64 MiB ran it out of heap and ended it (each run
# again: the topic stopped); one of 16 MiB is read and quarantined as line_too_long.
READ_LINE_LIMIT = 16 * 2**20
_LINE_END = re.compile(rb"\r\n|\r|\n")


class UnreadableFile(Exception):
    """An inbox file that cannot be read whole now (a broken or unfinished gzip
    stream): left in the inbox, named in a warning, taken once it reads whole."""


GZIP_ONLY = 31  # zlib's wbits for a gzip header: Hadoop reads gzip, not a zlib stream


class Gunzip:
    """Decompresses a `.gz` file chunk by chunk, across concatenated gzip members;
    zlib.error for bytes that are not gzip."""

    def __init__(self) -> None:
        self._unzip = zlib.decompressobj(wbits=GZIP_ONLY)

    def feed(self, chunk: bytes) -> bytes:
        """The decompressed bytes of `chunk` (may be empty until more is fed)."""
        text = self._unzip.decompress(chunk)
        while self._unzip.eof and self._unzip.unused_data:  # the next member
            rest = self._unzip.unused_data
            self._unzip = zlib.decompressobj(wbits=GZIP_ONLY)
            text += self._unzip.decompress(rest)
        return text

    @property
    def ended(self) -> bool:
        """Whether the bytes fed so far end with a whole gzip member (else the file was
        cut, or is still being written)."""
        return self._unzip.eof and not self._unzip.unused_data


def fingerprint(
    path: Path,
    prefix_size: int | None = None,
    size: int | None = None,
    other_sizes: Collection[int] = (),
) -> Fingerprint:
    """SHA-256 of the file's bytes and its line count, in one read of 1 MiB chunks;
    of its first `size` bytes only, when given (the size the ledger records: a
    producer may append while the file is read).

    Lines are counted as Spark's text reader splits them: at LF, CRLF or a
    bare CR, and a last line needs no line end (see count_line_ends); gzip
    files are counted on their decompressed bytes. With `prefix_size`, the
    same read also hashes the first `prefix_size` bytes (to tell an append),
    and notes whether `""` occurs anywhere; and the first bytes at each of
    `other_sizes` (to tell a file moved: moved_from).
    """
    digest = hashlib.sha256()
    unzip = Gunzip() if path.name.endswith(".gz") else None
    count, last = 0, b"\n"
    first_bytes, total = b"", 0  # the first decoded bytes, and how many there are
    # At the prefix's end: its checksum, its line ends, whether it ends with one; and
    # whether the text after it starts with one.
    boundary: tuple[str, int, bool] | None = None
    follows: bool | None = None
    offset, empty, tail = 0, False, 0  # tail: bytes since the last line end
    longest = 0
    left = size if size is not None else float("inf")
    sizes, sized = sorted(set(other_sizes)), []
    with open(path, "rb") as handle:
        while left > 0 and (chunk := handle.read(int(min(CHUNK_BYTES, left)))):
            left -= len(chunk)
            if sizes and sizes[0] <= offset + len(chunk):  # hashed on, piece by piece
                running, done, view = digest.copy(), 0, memoryview(chunk)
                while sizes and sizes[0] <= offset + len(chunk):
                    cut = sizes.pop(0) - offset
                    running.update(view[done:cut])
                    done = cut
                    sized.append((offset + cut, running.hexdigest()))
            # Split at the prefix's end: its facts are those of the bytes read up to it
            # (of the text they decode to, for a gzip that grew by a member).
            at = prefix_size - offset if prefix_size is not None else -1
            for piece in (chunk[:at], chunk[at:]) if 0 < at < len(chunk) else (chunk,):
                if boundary is None and offset == prefix_size:
                    boundary = (digest.hexdigest(), count, last in (b"\n", b"\r"))
                offset += len(piece)
                digest.update(piece)
                text = piece if unzip is None else _gunzipped(unzip, piece)
                if not text:
                    continue
                if boundary is not None and follows is None:
                    follows = text[:1] in (b"\n", b"\r")
                # A `""` may straddle two chunks.
                empty = empty or b'""' in text or (last == b'"' and text[:1] == b'"')
                count += count_line_ends(text, after_cr=last == b"\r")
                end = max(text.rfind(b"\n"), text.rfind(b"\r"))
                ends = [i for i in (text.find(b"\n"), text.find(b"\r")) if i >= 0]
                longest = max(longest, tail + (min(ends) if ends else len(text)))
                if len(text) > READ_LINE_LIMIT:  # a gzip's chunk: lines inside it, too
                    longest = max(longest, max(map(len, _LINE_END.split(text))))
                tail = len(text) - 1 - end if end >= 0 else tail + len(text)
                last = text[-1:]
                first_bytes, total = (first_bytes + text)[: len(BOM)], total + len(text)
    if unzip is not None and offset and not unzip.ended:
        raise UnreadableFile("its gzip stream ends before its end: cut, or still being written")
    lines = count + (last not in (b"\n", b"\r"))
    if total == len(BOM) and first_bytes == BOM:
        lines = 0  # Hadoop's reader skips a leading byte-order mark: nothing is left
    # Spark's reader drops a leading byte-order mark from the first line.
    marked = tail == total and first_bytes == BOM
    cut = 0 if unzip is not None else max(0, tail - len(BOM) * marked)
    facts = {
        "holds_empty_string": empty,
        "cut_bytes": cut,
        "longest_line": longest,
        "sized_checksums": tuple(sized),
        "looks_like": FOREIGN_STARTS.get(first_bytes[:2], ""),
    }
    if boundary is None:  # the file ends at (or before) the prefix's end: it did not grow
        return Fingerprint(digest.hexdigest(), lines, **facts)
    # No text after the prefix (a gzip member of none): its last line was whole.
    return Fingerprint(digest.hexdigest(), lines, *boundary, follows is not False, **facts)


# Text that starts so is no UTF-8 JSON: each line of it is quarantined, and the file's
# warning says how to convert it.
FOREIGN_STARTS = {b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16", b"\x1f\x8b": "gzip"}
CONVERSIONS = {"UTF-16": "`iconv -f UTF-16 -t UTF-8`", "gzip": "`gunzip` once more"}


def _gunzipped(unzip: Gunzip, chunk: bytes) -> bytes:
    try:
        return unzip.feed(chunk)
    except zlib.error as error:
        raise UnreadableFile(f"it is not gzip as its name says ({error})") from None


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
    """The topic's files that are not committed unchanged, with checksum and line count.

    A file grown by appending to its latest committed version is taken
    from its first new line (see the module docstring); so is a file that
    is another path's committed version moved or rotated (moved_from).
    """
    committed = newest_committed(ledger)
    found: list[InboxFile] = []
    moved: list[Path] = []  # new paths, and paths that no longer hold their version
    listed = topic_files(inbox, topic)
    for path in listed:
        before = committed.get(str(path))
        if before is None:  # a new path: read once, by moved_from
            moved.append(path)
            continue
        try:
            if is_unchanged(path, before):
                continue
            stat = path.stat()
            grew = stat.st_size > before.size
            facts = fingerprint(path, before.size if grew else None, stat.st_size)
        except FileNotFoundError:
            continue  # removed since it was listed
        except (UnreadableFile, OSError) as error:
            _leave_in_inbox(path, error)
            continue
        first_line = 1
        if grew and facts.prefix_checksum == before.checksum:
            first_line = _first_new_line(facts)
        elif facts.checksum != before.checksum:
            moved.append(path)
            continue
        found.append(_inbox_file(path, stat, facts, first_line))
    origins = MoveOrigins.of(committed, moved, {str(path) for path in listed})
    for path in moved:
        try:
            stat = path.stat()
            origin, facts, first_line = moved_from(path, stat, origins)
        except FileNotFoundError:
            continue
        except (UnreadableFile, OSError) as error:
            _leave_in_inbox(path, error)
            continue
        if origin is not None:
            _LOG.warning(
                f"{path} starts with {origin.path} as batch {origin.batch_id} committed it"
                f" ({origin.first_line + origin.line_count - 1:,} lines), which that path no"
                f" longer holds: taken as that file moved or rotated, from its line"
                f" {first_line} (lines already ingested are not taken again)."
            )
        found.append(_inbox_file(path, stat, facts, first_line))
    return sorted(found, key=lambda f: f.path)


@dataclass(frozen=True)
class MoveOrigins:
    """The committed versions a file found in a scan may be, moved (moved_from)."""

    # Of paths that are there still, holding something else now (rotated: logrotate's
    # `create` or `copytruncate` wrote the path anew): a file may start with one.
    replaced: tuple[LedgerEntry, ...]
    # Of paths that are gone, by (size, modification time): a file renamed or moved
    # keeps both, and is one of these byte for byte.
    deleted: dict[tuple[int, float], tuple[LedgerEntry, ...]]

    @classmethod
    def of(
        cls, committed: dict[str, LedgerEntry], changed: Iterable[Path], listed: set[str]
    ) -> MoveOrigins:
        """From the newest committed versions, the scan's new or changed paths and every
        path it listed."""
        replaced = tuple(
            committed[str(p)] for p in changed if str(p) in committed and committed[str(p)].size
        )
        deleted: dict[tuple[int, float], tuple[LedgerEntry, ...]] = {}
        for path, entry in committed.items():
            if path not in listed and entry.size:
                stamp = (entry.size, entry.mtime)
                deleted[stamp] = (*deleted.get(stamp, ()), entry)
        return cls(replaced, deleted)


def moved_from(
    path: Path, stat: os.stat_result, origins: MoveOrigins
) -> tuple[LedgerEntry | None, Fingerprint, int]:
    """Whether the file at `path` (`stat`: its size and time) is another path's committed
    version moved here: the longest such version, the file's facts, and its first line
    to take (1 when none).

    A version of a path that holds something else now (rotated) counts when the
    file starts with it, byte for byte (it may have grown since); a version of a
    path that is gone counts only when the file is it, byte for byte, with its
    modification time (a rename or `mv` keeps it): found by review, a new file
    that merely started with a deleted one's bytes (a heartbeat) lost its first
    lines. A `.gz` is one of a `.gz` (grown by gzip members).

    Found by review: a file renamed, moved to another folder or rotated to a name
    ending in `.json` (logrotate's `dateext`) was a new file, read whole again.
    """
    zipped, size = path.name.endswith(".gz"), stat.st_size
    candidates = [
        e
        for e in (*origins.replaced, *origins.deleted.get((size, stat.st_mtime), ()))
        if e.size <= size and e.path.endswith(".gz") == zipped and e.path != str(path)
    ]
    facts = fingerprint(path, size=size, other_sizes=[e.size for e in candidates])
    matched = dict(facts.sized_checksums)
    found = [e for e in candidates if matched.get(e.size) == e.checksum]
    if not found:
        return None, facts, 1
    origin = max(found, key=lambda e: (e.size, e.batch_id))
    if origin.size == size:
        return origin, facts, facts.line_count + 1
    grown = fingerprint(path, origin.size, size)
    if grown.prefix_checksum != origin.checksum:  # rewritten between the two reads
        return None, grown, 1
    return origin, grown, _first_new_line(grown)


def _first_new_line(facts: Fingerprint) -> int:
    """The first line past a committed version the file grew from (facts of a read with
    that version's size as `prefix_size`): past its complete lines, and past an
    unterminated last one too if it was whole (only its line end came later)."""
    whole = not facts.prefix_ends_line and facts.line_end_follows
    return facts.prefix_lines + 1 + whole


def _inbox_file(path: Path, stat: os.stat_result, facts: Fingerprint, first_line: int) -> InboxFile:
    """The scan's entry of a file: what to take of it, from `first_line`."""
    if facts.longest_line > READ_LINE_LIMIT:
        _LOG.warning(
            f"{path} holds a line of more than {READ_LINE_LIMIT // 2**20} MiB"
            f" ({facts.longest_line:,} bytes at least), which Spark would hold whole in"
            " memory (a longer one ended the driver): Spark reads a copy of the file in"
            " which such a line keeps its first max_line_bytes and a few bytes, and is"
            " quarantined as line_too_long. The file keeps the line whole."
        )
    if facts.looks_like:
        _LOG.warning(
            f"{path} looks like {facts.looks_like}, not UTF-8 JSON lines: its lines are"
            " quarantined (invalid_utf8, unparseable_json). Convert it with"
            f" {CONVERSIONS[facts.looks_like]} under a new name to have them read."
        )
    return InboxFile(
        str(path),
        stat.st_size,
        stat.st_mtime,
        facts.checksum,
        facts.line_count - (first_line - 1),
        first_line,
        facts.holds_empty_string,
        facts.cut_bytes,
        facts.longest_line,
    )


def _leave_in_inbox(path: Path, error: Exception) -> None:
    # Found by review: one such file stopped every run of its topic.
    _LOG.warning(
        f"{path} is left in the inbox, not read: {error}. It is taken once it reads"
        " whole; if it stays so, check it (`gzip -t`, its permissions) and replace it."
    )


def finished_since_scan(file: InboxFile, read_bytes: int | None) -> InboxFile:
    """`file` as its batch commits it: when the scan found its last line cut and Spark
    read that line longer (the producer finished it before the read: Spark's reader
    reads a line to its end), through that line as read and its line end, so the next
    run does not take the line again. Else `file` as scanned.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "a.json"
        >>> _ = path.write_bytes(b'{"id": 1}\\n{"id": 2}\\n{"id": 3}\\n')
        >>> scanned = fingerprint(path, size=16).checksum  # the scan saw `{"id": 1}\\n{"id":`
        >>> cut = InboxFile(str(path), 16, 0.0, scanned, 2, cut_bytes=6)
        >>> done = finished_since_scan(cut, read_bytes=9)
        >>> done.size, done.line_count, done.cut_bytes
        (20, 2, 0)
        >>> done.checksum == fingerprint(path, size=20).checksum
        True
        >>> finished_since_scan(cut, read_bytes=6) == cut
        True
        >>> _ = path.write_bytes(b'{"id": 7}\\n{"id": 8}\\n{"id": 9}\\n')  # rotated since
        >>> finished_since_scan(cut, read_bytes=9) == cut
        True
    """
    if not file.cut_bytes or read_bytes is None or read_bytes <= file.cut_bytes:
        return file
    end = file.size - file.cut_bytes + read_bytes
    try:
        with open(file.path, "rb") as handle:
            handle.seek(end)
            after = handle.read(2)
        ending = 2 if after == b"\r\n" else 1 if after[:1] in (b"\n", b"\r") else 0
        size = end + ending
        stat = Path(file.path).stat()
        facts = fingerprint(Path(file.path), prefix_size=file.size, size=size)
    except OSError:  # gone (rotated away) since the read: the scan's entry stands
        return file
    if facts.prefix_checksum != file.checksum:
        return file  # rewritten since the read (found by review): the scan's entry stands
    return replace(
        file,
        size=size,
        # The file as it is now, when that is all of it: the next run skips it unread.
        mtime=stat.st_mtime if stat.st_size == size else file.mtime,
        checksum=facts.checksum,
        cut_bytes=0 if ending else read_bytes,
    )


def newest_committed(entries: Iterable[LedgerEntry]) -> dict[str, LedgerEntry]:
    """Per path, its newest committed version (the latest batch id): the one the file
    is now, or grew from. Not the largest: a file truncated and written again
    (logrotate's `copytruncate`) must be compared with what it held last.

    Example:
        >>> old = LedgerEntry("a", 18, 0.0, "c1", 2, "20261121T080000Z-1", COMMITTED)
        >>> new = LedgerEntry("a", 9, 0.0, "c2", 1, "20261121T090000Z-2", COMMITTED)
        >>> newest_committed([new, old])["a"].checksum
        'c2'
    """
    newest: dict[str, LedgerEntry] = {}
    for entry in entries:
        if entry.state == COMMITTED and entry.batch_id >= newest.get(entry.path, entry).batch_id:
            newest[entry.path] = entry
    return newest


def latest_entries(entries: Iterable[LedgerEntry]) -> dict[tuple[str, str], LedgerEntry]:
    """The last word on each (path, checksum): committed beats pending."""
    latest: dict[tuple[str, str], LedgerEntry] = {}
    for entry in entries:
        key = (entry.path, entry.checksum)
        if key not in latest or entry.state == COMMITTED:
            latest[key] = entry
    return latest


def new_batch_id(files: Iterable[InboxFile], now: datetime, sequence: int = 0) -> str:
    """A sortable, unique batch id: UTC time plus a hash of the files it takes.

    The `sequence` of a batch within one run (a backlog cut in several)
    follows the time, so the batches of one run sort in the order they
    commit (`-` sorts before `.`): landing models take batches by id order.

    Example:
        >>> from datetime import UTC
        >>> new_batch_id([], datetime(2026, 11, 21, 8, 30, tzinfo=UTC))
        '20261121T083000Z-e3b0c442'
        >>> new_batch_id([], datetime(2026, 11, 21, 8, 30, tzinfo=UTC), 2)
        '20261121T083000Z.000002-e3b0c442'
    """
    digest = hashlib.sha256()
    for file in sorted(files, key=lambda f: f.path):
        digest.update(f"{file.path}\0{file.checksum}\n".encode())
    # Six digits: a run of 10,000 batches (4 digits, as before) sorted `.10000` first.
    order = f".{sequence:06d}" if sequence else ""
    return f"{now:%Y%m%dT%H%M%SZ}{order}-{digest.hexdigest()[:8]}"


def batch_clock(now: datetime, entries: Iterable[LedgerEntry]) -> datetime:
    """`now`, or a second after the time of the topic's newest batch id when the clock is
    not past it (a clock stepped back, a run on another host, two runs in one second):
    readers take batches in id order, so a new id must sort after every one before.

    Example:
        >>> from datetime import UTC
        >>> entry = LedgerEntry("a", 1, 0.0, "c", 1, "20261121T083000Z-e3b0c442", COMMITTED)
        >>> batch_clock(datetime(2026, 11, 21, 8, 0, tzinfo=UTC), [entry])
        datetime.datetime(2026, 11, 21, 8, 30, 1, tzinfo=datetime.timezone.utc)
        >>> batch_clock(datetime(2026, 11, 21, 9, 0, tzinfo=UTC), [entry]).hour
        9
    """
    newest = max((entry.batch_id for entry in entries), default="")
    try:
        then = datetime.strptime(newest[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:  # no batch yet
        return now
    return max(now, then + timedelta(seconds=1))


def cut_backlog(files: list[InboxFile], limits: BatchLimits) -> list[list[InboxFile]]:
    """New files in path order, cut into batches within `limits` (a file never split).

    Example:
        >>> files = [InboxFile(f"/t/{n}", 10, 0.0, "c", 1) for n in "abc"]
        >>> [[f.path for f in b] for b in cut_backlog(files, BatchLimits(max_files=2))]
        [['/t/a', '/t/b'], ['/t/c']]
    """
    batches: list[list[InboxFile]] = []
    size = 0
    for file in sorted(files, key=lambda f: f.path):
        full = batches and (
            len(batches[-1]) >= limits.max_files or size + file.size > limits.max_bytes
        )
        if not batches or full:
            batches.append([])
            size = 0
        batches[-1].append(file)
        size += file.size
    return batches


def plan_batches(
    scanned: Iterable[InboxFile],
    ledger: Iterable[LedgerEntry],
    now: datetime,
    limits: BatchLimits = BatchLimits(),
) -> list[Batch]:
    """Batches to ingest, oldest first: each pending batch again (with its files as they
    are now; none when all are gone), then the new files.

    A backlog of new files is cut into batches within `limits`, so a run
    after a long outage neither reads it all at once nor fails on its size.
    Returns an empty list when every file is committed: a run with no new
    files reads no data.
    """
    entries = list(ledger)
    latest = latest_entries(entries)
    committed = {entry.batch_id for entry in entries if entry.state == COMMITTED}
    pending: dict[str, list[InboxFile]] = {
        entry.batch_id: [] for entry in entries if entry.batch_id not in committed
    }
    # A path a pending batch took is its again, whatever the file holds now (the newest
    # such batch's, should two have taken it): never a new batch beside its rows.
    owner = {
        entry.path: entry.batch_id
        for entry in sorted(entries, key=lambda e: e.batch_id)
        if entry.batch_id in pending
    }
    fresh: list[InboxFile] = []
    for file in scanned:
        entry = latest.get((file.path, file.checksum))
        if entry is not None and entry.state == COMMITTED:
            continue
        if file.path in owner:
            pending[owner[file.path]].append(file)
        else:
            fresh.append(file)
    batches = [
        Batch(batch_id, tuple(files), rerun=True) for batch_id, files in sorted(pending.items())
    ]
    now = batch_clock(now, entries)
    for sequence, files in enumerate(cut_backlog(fresh, limits)):
        batches.append(Batch(new_batch_id(files, now, sequence), tuple(files)))
    return batches
