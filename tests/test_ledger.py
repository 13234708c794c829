"""The ledger's decisions: new files once, pending batches again, changed files anew."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from dynamic_ddl.ingest.ledger import (
    BOM,
    CHUNK_BYTES,
    COMMITTED,
    PENDING,
    READ_LINE_LIMIT,
    BatchLimits,
    InboxFile,
    LedgerEntry,
    count_line_ends,
    file_checksum,
    fingerprint,
    plan_batches,
    scan_inbox,
)

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def _file(name: str, checksum: str = "c") -> InboxFile:
    return InboxFile(path=f"/in/t/{name}", size=10, mtime=1.0, checksum=checksum, line_count=1)


def _entry(name: str, checksum: str, batch_id: str, state: str) -> LedgerEntry:
    return LedgerEntry(f"/in/t/{name}", 10, 1.0, checksum, 1, batch_id, state)


def test_first_run_takes_every_file_in_one_batch():
    batches = plan_batches([_file("a"), _file("b")], [], NOW)
    assert len(batches) == 1
    assert batches[0].batch_id.startswith("20261121T120000Z-")
    assert [f.path for f in batches[0].files] == ["/in/t/a", "/in/t/b"]


def test_committed_files_are_never_taken_again():
    ledger = [
        _entry("a", "c", "b1", PENDING),
        _entry("a", "c", "b1", COMMITTED),
    ]
    assert plan_batches([_file("a")], ledger, NOW) == []
    batches = plan_batches([_file("a"), _file("b")], ledger, NOW)
    assert [f.path for b in batches for f in b.files] == ["/in/t/b"]


def test_pending_batch_is_rerun_under_its_own_id():
    ledger = [_entry("a", "c", "b-killed", PENDING)]
    batches = plan_batches([_file("a"), _file("b")], ledger, NOW)
    assert [(b.batch_id, [f.path for f in b.files]) for b in batches][0] == (
        "b-killed",
        ["/in/t/a"],
    )
    assert [f.path for f in batches[1].files] == ["/in/t/b"]


def test_a_pending_batch_takes_its_files_as_they_are_now_and_is_rerun_when_all_are_gone():
    # A killed batch's file changed (appended to) before the rerun: the rerun takes it,
    # never a new batch beside the killed run's rows (found by review: it duplicated).
    ledger = [
        _entry("a", "old", "b-killed", PENDING),
        _entry("b", "c", "b-killed", PENDING),
        _entry("c", "c", "b-gone", PENDING),  # every file of this one is gone
        _entry("d", "c", "b-done", COMMITTED),
    ]
    batches = plan_batches([_file("a", checksum="new"), _file("e")], ledger, NOW)
    assert [(b.batch_id, [f.checksum for f in b.files], b.rerun) for b in batches[:2]] == [
        ("b-gone", [], True),
        ("b-killed", ["new"], True),
    ]
    assert [f.path for f in batches[2].files] == ["/in/t/e"] and not batches[2].rerun
    # Two killed batches that took one path (a ledger written before): the newer has it.
    twice = [_entry("a", "v1", "b1", PENDING), _entry("a", "v2", "b2", PENDING)]
    batches = plan_batches([_file("a", checksum="v3")], twice, NOW)
    assert [(b.batch_id, [f.checksum for f in b.files]) for b in batches] == [
        ("b1", []),
        ("b2", ["v3"]),
    ]


def test_changed_content_at_the_same_path_is_a_new_file():
    ledger = [_entry("a", "old", "b1", COMMITTED)]
    batches = plan_batches([_file("a", checksum="new")], ledger, NOW)
    assert [f.checksum for f in batches[0].files] == ["new"]


def test_batch_ids_depend_on_the_files():
    one = plan_batches([_file("a")], [], NOW)[0].batch_id
    two = plan_batches([_file("b")], [], NOW)[0].batch_id
    assert one != two and one[:17] == two[:17]


def test_scan_reads_size_checksum_and_lines(tmp_path):
    day = tmp_path / "t" / "dt=2026-11-01"
    day.mkdir(parents=True)
    (day / "part-0.json").write_bytes(b'{"a": 1}\n\n{"a": 2}')
    with gzip.open(day / "part-1.json.gz", "wb") as handle:
        handle.write(b'{"a": 3}\n{"a": 4}\n')
    plain, zipped = scan_inbox(tmp_path, "t")
    assert plain.size == 18 and plain.line_count == 3
    assert plain.checksum == file_checksum(day / "part-0.json") and len(plain.checksum) == 64
    assert zipped.line_count == 2


def test_a_fingerprint_of_a_size_describes_those_bytes_only(tmp_path):
    # The scan records a file's size, then reads it: bytes a producer appends in between
    # made a checksum and a line count of more than that size, so the next run took the
    # grown file for a new one and read it whole again.
    lines = b"".join(b'{"n": %d}\n' % n for n in range(CHUNK_BYTES // 8))
    whole, head = tmp_path / "whole.json", tmp_path / "head.json"
    whole.write_bytes(lines + b'{"n": "appended"}\n')
    head.write_bytes(lines)
    assert fingerprint(whole, size=len(lines)) == fingerprint(head)
    assert fingerprint(whole, size=len(lines)).line_count == CHUNK_BYTES // 8


def test_scan_skips_committed_files_unread(tmp_path):
    day = tmp_path / "t" / "dt=2026-11-01"
    day.mkdir(parents=True)
    path = day / "part-0.json"
    path.write_bytes(b'{"a": 1}\n')
    (scanned,) = scan_inbox(tmp_path, "t")
    committed = LedgerEntry(scanned.path, scanned.size, scanned.mtime, "c", 1, "b1", COMMITTED)
    assert scan_inbox(tmp_path, "t", [committed]) == []
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n')  # appended to: read again
    (again,) = scan_inbox(tmp_path, "t", [committed])
    assert again.line_count == 2


def test_a_backlog_is_cut_into_batches_that_sort_in_commit_order():
    files = [_file(name) for name in "abcde"]
    batches = plan_batches(files, [], NOW, BatchLimits(max_files=2))
    assert [[f.path[-1] for f in b.files] for b in batches] == [["a", "b"], ["c", "d"], ["e"]]
    ids = [b.batch_id for b in batches]
    assert ids == sorted(ids) and len(set(ids)) == 3
    by_size = plan_batches(files, [], NOW, BatchLimits(max_bytes=25))  # files of 10 bytes
    assert [len(b.files) for b in by_size] == [2, 2, 1]
    huge = plan_batches([_file("a")], [], NOW, BatchLimits(max_bytes=1))
    assert [len(b.files) for b in huge] == [1]  # a file is never split, never left out


def test_lines_end_at_lf_crlf_and_a_bare_cr_across_chunks():
    assert count_line_ends(b"a\r\nb\rc\n") == 3
    assert count_line_ends(b"\nx", after_cr=True) == 0
    assert count_line_ends(b"\rx", after_cr=True) == 1


def test_the_read_notes_an_empty_string_anywhere_even_across_chunks(tmp_path):
    # Only a file holding `""` needs the second inference (parse.empty_strings_as_text).
    cases = {
        "none.json": b'{"a": "x", "b": "\\"q"}\n',
        # a superset: an escaped quote before the closing one counts (nothing is found then)
        "escaped.json": b'{"b": "\\"q\\""}\n',
        "plain.json": b'{"a": 1}\n{"a": ""}\n',
        "zipped.json.gz": gzip.compress(b'{"a": ""}\n'),
        # the two quotes on either side of a chunk boundary
        "straddling.json": b" " * (CHUNK_BYTES - 7) + b'{"a": "' + b'"}\n',
    }
    for name, payload in cases.items():
        (tmp_path / name).write_bytes(payload)
    noted = {name: fingerprint(tmp_path / name).holds_empty_string for name in cases}
    assert noted == {
        "none.json": False,
        "escaped.json": True,
        "plain.json": True,
        "zipped.json.gz": True,
        "straddling.json": True,
    }


def test_new_batch_ids_sort_after_every_batch_before_them():
    # Found by review: readers take batches in id order, and ids began with the clock's
    # time: a clock stepped back (or another host's) gave ids below the committed ones,
    # which a landing model that had seen those skipped; the 10,001st batch of one run
    # (`.10000`) sorted before `.9999`.
    committed = [_entry("a", "c", "20261121T130000Z-aaaaaaaa", COMMITTED)]
    (batch,) = plan_batches([_file("b")], committed, NOW)  # NOW is an hour earlier
    assert batch.batch_id > committed[0].batch_id
    files = [_file(f"{n:05d}") for n in range(10_001)]
    ids = [b.batch_id for b in plan_batches(files, [], NOW, BatchLimits(max_files=1))]
    assert ids == sorted(ids) and len(set(ids)) == len(files)


def _hadoop_lines(data: bytes) -> list[bytes]:
    """The lines Spark's text reader gives: split at LF, CRLF or a bare CR."""
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    return lines[:-1] if data.endswith((b"\n", b"\r")) or not data else lines


def _taken_by_each_run(
    tmp_path, versions: list[bytes], names: list[str] | None = None, zipped: bool = False
) -> list[dict[int, bytes]]:
    """Each version of one inbox file scanned in turn, every scan committed: per scan,
    the lines it takes by their line number (first_line on). `names`: the file's name
    at each version (renamed, its time kept, and scanned so, before the version is
    written); `zipped`: a `.gz` file grown by one gzip member per version."""
    day = tmp_path / "t" / "dt=2026-11-01"
    day.mkdir(parents=True, exist_ok=True)
    names = names or ["log.json"] * len(versions)
    path, ledger, taken, written = None, [], [], b""

    def scan(run: int, lines: list[bytes]) -> None:
        for f in scan_inbox(tmp_path, "t", ledger):
            numbers = range(f.first_line, f.first_line + f.line_count)
            taken.append({n: lines[n - 1] for n in numbers})
            batch_id = f"20261121T{len(ledger):06d}Z-b"
            ledger.append(
                LedgerEntry(f.path, f.size, f.mtime, f.checksum, f.line_count, batch_id, COMMITTED)
            )
            ledger[-1] = dataclasses.replace(ledger[-1], first_line=f.first_line)

    for run, (data, name) in enumerate(zip(versions, names, strict=True)):
        name += ".gz" if zipped else ""
        if path is not None and path.name != name:  # renamed, then a run
            path = path.rename(day / name)
            scan(run, _hadoop_lines(versions[run - 1]))
        path = day / name
        if zipped:
            written += gzip.compress(data[len(versions[run - 1]) if run else 0 :])
        if run == 0 or data != versions[run - 1]:
            path.write_bytes(written if zipped else data)
        scan(run, _hadoop_lines(data))
    return taken


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.binary(min_size=1, max_size=12).map(lambda b: b.translate(_FEW)), max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
    st.booleans(),
)
@example(pieces=[b"a\r", b"\n{"], renames=[False, True], zipped=True)
def test_a_file_appended_in_any_pieces_has_each_line_taken_and_retaken_only_if_cut(
    pieces, renames, zipped
):
    """A producer appends bytes in any pieces (lines cut anywhere, CR, CRLF; or one gzip
    member each), a run scans after each, and the file may be renamed (a run between)
    before a piece (found by review: a renamed file was read whole again, as a `.gz`
    that grew): every line of the final file is taken; a line is taken again only when
    the run before took it cut (its fragment), and the last taking is the whole line."""
    names = [f"log-{sum(renames[: i + 1])}.json" for i in range(len(pieces))]
    with tempfile.TemporaryDirectory() as folder:
        versions = list(itertools.accumulate(pieces))
        final = _hadoop_lines(versions[-1]) if versions else []
        taken = _taken_by_each_run(Path(folder), versions, names, zipped)
    last: dict[int, bytes] = {}
    for run in taken:
        for number, line in run.items():
            assert number not in last or last[number] != final[number - 1], (number, taken)
            last[number] = line
    assert last == dict(enumerate(final, start=1))


# Line ends, JSON punctuation and a letter: small alphabets find cut lines quickly.
_FEW = bytes(range(256)).maketrans(bytes(range(256)), bytes(b"\n\r{}a"[i % 5] for i in range(256)))


def test_a_file_truncated_and_written_again_is_followed_from_its_new_start(tmp_path):
    # logrotate's copytruncate: the file is emptied and written again. The ledger compared
    # it with its largest version, not its newest, so once it regrew to that size its
    # new start was taken again (the newest version's line 1, twice).
    versions = [b'{"id":1}\n{"id":2}\n', b'{"id":3}\n', b'{"id":3}\n{"id":4}\n']
    assert _taken_by_each_run(tmp_path, versions) == [
        {1: b'{"id":1}', 2: b'{"id":2}'},
        {1: b'{"id":3}'},
        {2: b'{"id":4}'},
    ]


def test_a_line_cut_by_a_scan_is_taken_again_whole_and_no_other(tmp_path):
    # A scan caught the producer mid-line: the next run read the whole file again.
    cut = [b'{"id":1}\n{"id":', b'{"id":1}\n{"id":2}\n{"id":3}\n']
    assert _taken_by_each_run(tmp_path, cut) == [
        {1: b'{"id":1}', 2: b'{"id":'},
        {2: b'{"id":2}', 3: b'{"id":3}'},
    ]
    # A last line that was whole, only its line end came later, is not taken again.
    whole = [b'{"id":1}', b'{"id":1}\n{"id":2}\n']
    assert _taken_by_each_run(tmp_path / "b", whole) == [{1: b'{"id":1}'}, {2: b'{"id":2}'}]


def test_the_scan_notes_the_bytes_of_a_last_line_without_its_line_end(tmp_path):
    # What a batch compares with Spark's read of that line (ledger.finished_since_scan).
    cases = {
        b'{"a": 1}\n{"b": ': 6,
        b'{"a": 1}\n': 0,
        b'{"a": 1}\r': 0,
        b"abc": 3,
        BOM + b'{"a"': 4,  # Spark's reader drops the mark from the first line
        b"a\nb" + b"c" * CHUNK_BYTES: CHUNK_BYTES + 1,  # across chunks
    }
    for n, (data, cut) in enumerate(cases.items()):
        (tmp_path / f"{n}.json").write_bytes(data)
        assert fingerprint(tmp_path / f"{n}.json").cut_bytes == cut, data[:20]
    with gzip.open(tmp_path / "z.json.gz", "wb") as handle:
        handle.write(b'{"a": 1}\n{"b": ')
    assert fingerprint(tmp_path / "z.json.gz").cut_bytes == 0  # a member ends the text


def test_the_longest_line_is_measured_across_read_chunks(tmp_path):
    """What keeps a line Spark cannot hold out of its reach (ledger.READ_LINE_LIMIT)."""
    long = READ_LINE_LIMIT + CHUNK_BYTES // 2  # across chunks; within one gzip chunk
    text = b'{"a": 1}\n' + b"x" * long + b"\r\n" + b"yy\r" + b"z" * 7
    plain, zipped = tmp_path / "a.json", tmp_path / "a.json.gz"
    plain.write_bytes(text)
    zipped.write_bytes(gzip.compress(text))
    assert fingerprint(plain).longest_line == fingerprint(zipped).longest_line == long


def _topic_folder(tmp_path) -> Path:
    """The folder of topic `t` in the inbox `tmp_path`, made."""
    folder = tmp_path / "t"
    folder.mkdir()
    return folder


def _commit_scan(tmp_path, ledger: list, run: int) -> dict[str, InboxFile]:
    """Scan the `t` topic of `tmp_path` with `ledger`, commit every file found (as a run
    does), and return what it found by file name."""
    found = scan_inbox(tmp_path, "t", ledger)
    for f in found:
        entry = LedgerEntry(f.path, f.size, f.mtime, f.checksum, f.line_count, f"b{run}", COMMITTED)
        ledger.append(dataclasses.replace(entry, first_line=f.first_line))
    return {Path(f.path).name: f for f in found}


def test_a_file_moved_renamed_or_rotated_is_taken_from_its_first_new_line(tmp_path, caplog):
    """Found by review: a file renamed, moved to another folder or rotated to a name
    ending in .json (logrotate's dateext) was a new file, and every line it held was
    ingested again. A new path that is a gone path's committed version (byte for byte,
    its time kept), or starts with a rotated path's, is that file moved: only the lines
    past that version are taken."""
    folder, ledger = _topic_folder(tmp_path), []
    (folder / "app.json").write_bytes(b'{"n": 1}\n{"n": 2}\n')
    assert _commit_scan(tmp_path, ledger, 1)["app.json"].line_count == 2
    # Renamed: nothing new.
    (folder / "app.json").rename(folder / "app-1.json")
    moved = _commit_scan(tmp_path, ledger, 2)["app-1.json"]
    assert (moved.first_line, moved.line_count) == (3, 0)
    assert "app.json as batch b1 committed it (2 lines)" in caplog.text
    # Appended to, then rotated (dateext) into a folder, a new file in its place: the
    # appended line is taken from the rotated file, the new file whole.
    with open(folder / "app-1.json", "ab") as handle:
        handle.write(b'{"n": 3}\n')
    (folder / "2026").mkdir()
    (folder / "app-1.json").rename(folder / "2026" / "app-20261128.json")
    (folder / "app-1.json").write_bytes(b'{"n": 4}\n')
    found = _commit_scan(tmp_path, ledger, 3)
    rotated = found["app-20261128.json"]
    assert (rotated.first_line, rotated.line_count) == (3, 1)
    assert (found["app-1.json"].first_line, found["app-1.json"].line_count) == (1, 1)
    # Copied and truncated (copytruncate) to a .json name: the copy's new lines only.
    data = (folder / "app-1.json").read_bytes() + b'{"n": 5}\n'
    (folder / "app-1.copy.json").write_bytes(data)
    (folder / "app-1.json").write_bytes(b'{"n": 6}\n')
    found = _commit_scan(tmp_path, ledger, 4)
    assert (found["app-1.copy.json"].first_line, found["app-1.copy.json"].line_count) == (2, 1)
    assert (found["app-1.json"].first_line, found["app-1.json"].line_count) == (1, 1)
    # A copy while the file is still there is another file: taken whole; so is a file
    # of the same bytes as one deleted, made anew (a rename keeps the time).
    (folder / "again.json").write_bytes((folder / "app-1.json").read_bytes())
    assert _commit_scan(tmp_path, ledger, 5)["again.json"].line_count == 1
    (folder / "again.json").unlink()
    (folder / "anew.json").write_bytes((folder / "app-1.json").read_bytes())
    os.utime(folder / "anew.json", (1, 1))
    assert _commit_scan(tmp_path, ledger, 51)["anew.json"].line_count == 1
    # A .gz moved whole is the same file.
    (folder / "z.json.gz").write_bytes(gzip.compress(b'{"n": 7}\n'))
    _commit_scan(tmp_path, ledger, 6)
    (folder / "z.json.gz").rename(folder / "y.json.gz")
    assert _commit_scan(tmp_path, ledger, 7)["y.json.gz"].line_count == 0


def test_a_file_rotated_while_its_last_line_was_cut_takes_that_line_again_whole(tmp_path):
    """As a file that grew (test above): a version whose last line had no line end yet
    is followed from that line when the bytes after it do not start with a line end."""
    folder, ledger = _topic_folder(tmp_path), []
    (folder / "a.json").write_bytes(b'{"n": 1}\n{"n"')
    assert _commit_scan(tmp_path, ledger, 1)["a.json"].line_count == 2
    (folder / "a.json").rename(folder / "b.json")
    (folder / "b.json").write_bytes(b'{"n": 1}\n{"n": 2}\n{"n": 3}\n')
    (folder / "a.json").write_bytes(b'{"n": 4}\n')  # logrotate's create
    found = _commit_scan(tmp_path, ledger, 2)
    assert (found["b.json"].first_line, found["b.json"].line_count) == (2, 2)
    assert (found["a.json"].first_line, found["a.json"].line_count) == (1, 1)


def test_a_new_file_that_starts_as_a_deleted_one_is_read_whole(tmp_path):
    """Found by review of the first version: a file whose path is gone counted as moved
    when a new file merely started with its bytes: a heartbeat file deleted, then
    `{"x":1}` sent again with a line more, lost its first line. A gone path's version
    counts only byte for byte with its modification time (a rename keeps it)."""
    folder, ledger = _topic_folder(tmp_path), []
    (folder / "s-1.json").write_bytes(b'{"x":1}')
    _commit_scan(tmp_path, ledger, 1)
    (folder / "s-1.json").unlink()
    (folder / "s-2.json").write_bytes(b'{"x":1}\n')
    (folder / "s-3.json").write_bytes(b'{"x":1}\n{"x":2}\n')
    found = _commit_scan(tmp_path, ledger, 2)
    assert {n: (f.first_line, f.line_count) for n, f in found.items()} == {
        "s-2.json": (1, 1),
        "s-3.json": (1, 2),
    }


def test_a_copy_made_by_copytruncate_is_known_whatever_its_time(tmp_path):
    """Found by review of the first version: logrotate's copytruncate gives the copy a
    time of its own, and a copy with nothing new was read whole again."""
    folder, ledger = _topic_folder(tmp_path), []
    (folder / "app.json").write_bytes(b'{"n": 1}\n{"n": 2}\n')
    _commit_scan(tmp_path, ledger, 1)
    (folder / "app-20261128.json").write_bytes((folder / "app.json").read_bytes())
    os.utime(folder / "app-20261128.json", (1, 1))
    (folder / "app.json").write_bytes(b"")
    copy = _commit_scan(tmp_path, ledger, 2)["app-20261128.json"]
    assert (copy.first_line, copy.line_count) == (3, 0)


def test_a_file_in_utf16_or_gzipped_twice_is_named_with_its_conversion(tmp_path, caplog):
    """Found by review: Windows PowerShell writes UTF-16 with `>`, and a `.gz` may hold a
    `.gz`: every line was quarantined with no word of why. They still are (nothing is
    guessed), and the scan names the file and the command that converts it."""
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "ps.json").write_bytes('{"id": 1}\r\n'.encode("utf-16"))
    (folder / "twice.json.gz").write_bytes(gzip.compress(gzip.compress(b'{"id": 1}\n')))
    (folder / "ok.json").write_bytes(b'{"id": 1}\n')
    with caplog.at_level("WARNING", logger="dynamic_ddl.ingest"):
        found = {Path(f.path).name for f in scan_inbox(tmp_path, "t")}
    assert found == {"ps.json", "twice.json.gz", "ok.json"}  # read all the same
    assert "ps.json looks like UTF-16" in caplog.text and "iconv -f UTF-16" in caplog.text
    assert "twice.json.gz looks like gzip" in caplog.text and "gunzip` once more" in caplog.text
    assert "ok.json looks like" not in caplog.text


def test_an_empty_gzip_member_appended_takes_no_line_again(tmp_path):
    """Found by review: a member of no text (a flush with nothing to write) after a last
    line with no line end made that line taken again."""
    folder, ledger = _topic_folder(tmp_path), []
    (folder / "z.json.gz").write_bytes(gzip.compress(b'{"n":1}\n{"n":2}'))
    _commit_scan(tmp_path, ledger, 1)
    with open(folder / "z.json.gz", "ab") as appending:
        appending.write(gzip.compress(b""))
    grown = _commit_scan(tmp_path, ledger, 2)["z.json.gz"]
    assert (grown.first_line, grown.line_count) == (3, 0)
