"""From a raw row back to its original line in the inbox, checked against the ledger."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from dynamic_ddl.ingest.ledger import COMMITTED, PENDING, LedgerEntry, fingerprint
from dynamic_ddl.ingest.lineage import LineageError, original_line, read_line
from tests.test_hostile_inbox import ingest, write_lines
from tests.test_ledger import _commit_scan, _topic_folder


def _entry(path: Path, batch_id: str = "b1", first_line: int = 1, state: str = COMMITTED):
    facts = fingerprint(path)
    lines = facts.line_count - (first_line - 1)
    size = path.stat().st_size
    return LedgerEntry(
        str(path), size, 0.0, facts.checksum, lines, batch_id, state, None, first_line
    )


def test_a_line_is_read_as_spark_splits_lines(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b'\xef\xbb\xbf{"a":1}\r\n{"b":2}\r{"c":3}\n\n{"d":4}')
    entries = [_entry(path)]
    lines = [original_line(entries, str(path), n) for n in range(1, 6)]
    assert lines == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b"", b'{"d":4}']
    with pytest.raises(LineageError, match="No committed batch took line 6"):
        original_line(entries, str(path), 6)


def test_a_gzipped_file_is_read_decompressed(tmp_path):
    path = tmp_path / "[odd] name %.json.gz"
    path.write_bytes(gzip.compress(b'{"a":1}\n') + gzip.compress(b'{"b":2}\n'))
    assert original_line([_entry(path)], str(path), 2) == b'{"b":2}'


def test_a_changed_or_removed_file_is_reported_not_guessed(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b'{"a":1}\n{"a":2}\n')
    entries = [_entry(path)]
    path.write_bytes(b'{"a":1}\n{"a":3}\n')  # same size, other bytes
    with pytest.raises(LineageError, match="changed after batch b1"):
        original_line(entries, str(path), 2)
    path.unlink()
    with pytest.raises(LineageError, match="removed from the inbox"):
        original_line(entries, str(path), 1)


def test_a_grown_file_keeps_its_earlier_lines_and_each_batch_its_own(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b'{"a":1}\n')
    first = _entry(path, "b1")
    path.write_bytes(b'{"a":1}\n{"a":2}\n')
    grown = _entry(path, "b2", first_line=2)
    pending = _entry(path, "b3", state=PENDING)
    entries = [first, grown, pending]
    assert original_line(entries, str(path), 1, batch_id="b1") == b'{"a":1}'
    assert original_line(entries, str(path), 2) == b'{"a":2}'
    with pytest.raises(LineageError, match="in batch b1"):
        original_line(entries, str(path), 2, batch_id="b1")
    assert read_line(path, 2) == b'{"a":2}'


def test_each_batch_gets_the_line_it_read_from_a_file_rewritten_or_completed(tmp_path):
    path = tmp_path / "a.json.gz"
    path.write_bytes(gzip.compress(b'{"a":1}\n{"a":'))  # the last line not complete yet
    first = _entry(path, "b1")
    path.write_bytes(path.read_bytes() + gzip.compress(b"2}\n"))  # a gzip file is read anew
    again = _entry(path, "b2")
    entries = [first, again]
    assert original_line(entries, str(path), 2, batch_id="b1") == b'{"a":'
    assert original_line(entries, str(path), 2, batch_id="b2") == b'{"a":2}'
    with pytest.raises(LineageError, match="pass the row's _batch_id"):
        original_line(entries, str(path), 2)

    rewritten = tmp_path / "b.json"
    rewritten.write_bytes(b'{"b":1}\n')
    old = _entry(rewritten, "b1")
    rewritten.write_bytes(b'{"b":22}\n')
    new = _entry(rewritten, "b2")
    assert original_line([old, new], str(rewritten), 1, batch_id="b2") == b'{"b":22}'
    with pytest.raises(LineageError, match="changed after batch b1"):
        original_line([old, new], str(rewritten), 1, batch_id="b1")


def test_a_line_of_a_file_renamed_or_rotated_since_is_read_where_it_went(tmp_path):
    """Found by review: the ledger follows a file renamed, moved or rotated (it takes the
    new path from its first new line), but the original line of a row taken before the
    move was reported removed or changed. It is read from the file its version went on
    in, checked against the ledger as any line is."""
    folder, ledger = _topic_folder(tmp_path), []
    first = folder / "app.json"
    first.write_bytes(b'{"n": 1}\n{"n": 2}\n')
    _commit_scan(tmp_path, ledger, 1)
    first.rename(folder / "app-1.json")  # renamed
    _commit_scan(tmp_path, ledger, 2)
    with open(folder / "app-1.json", "ab") as handle:  # appended to, then rotated
        handle.write(b'{"n": 3}\n')
    (folder / "2026").mkdir()
    rotated = folder / "2026" / "app-20261128.json"
    (folder / "app-1.json").rename(rotated)
    (folder / "app-1.json").write_bytes(b'{"n": 4}\n')  # a new file in its place
    _commit_scan(tmp_path, ledger, 3)
    assert original_line(ledger, str(first), 2) == b'{"n": 2}'
    assert original_line(ledger, str(rotated), 3) == b'{"n": 3}'
    assert original_line(ledger, str(folder / "app-1.json"), 1, batch_id="b3") == b'{"n": 4}'
    rotated.write_bytes(b'{"n": 1}\n{"n": 5}\n')  # the one copy changed: reported
    with pytest.raises(LineageError, match="removed from the inbox"):
        original_line(ledger, str(first), 2)


def test_line_numbers_hold_where_spark_reads_a_file_in_pieces(spark, tmp_path):
    """A file Spark reads in several pieces (as it splits any file over
    maxPartitionBytes), beside a small one: each raw row's and quarantined line's
    `_line_number` is its line in its file, and that line is the one lineage returns."""
    big = [
        f'{{"id": {n}, "ts": "2026-11-01T00:00:00Z", "pad": "{"x" * (n % 7)}"}}'
        for n in range(1, 301)
    ]
    big[149] = "not json"  # line 150, quarantined
    write_lines(tmp_path, "big.json", big)
    write_lines(tmp_path, "small.json", ['{"id": 1000, "ts": "2026-11-01T00:00:00Z"}'])
    setting = "spark.sql.files.maxPartitionBytes"
    before = spark.conf.get(setting)
    spark.conf.set(setting, "2000")  # the big file is about 15 kB: 8 pieces
    try:
        assert spark.read.text(str(tmp_path / "feed" / "big.json")).rdd.getNumPartitions() > 4
        ingest(spark, "lineage_pieces", tmp_path)
    finally:
        spark.conf.set(setting, before)
    rows = spark.table("lineage_pieces.raw_feed").select("id", "_source_file", "_line_number")
    numbered = {(Path(r._source_file).name, r._line_number): r.id for r in rows.collect()}
    expected = {("big.json", n): n for n in range(1, 301) if n != 150}
    assert numbered == {**expected, ("small.json", 1): 1000}
    quarantined = spark.table("lineage_pieces.raw_quarantine").select("line_number").collect()
    assert [r.line_number for r in quarantined] == [150]
