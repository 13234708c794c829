"""Reading a batch into numbered lines, and the reasons a line is rejected."""

from __future__ import annotations

import gzip

from dynamic_ddl.ingest.lines import LineLimits, classify_lines, read_lines


def _write(path, payload: bytes, compress: bool = False):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(payload) if compress else payload)
    return str(path)


def test_every_line_is_numbered_and_classified(spark, tmp_path):
    plain = _write(
        tmp_path / "t" / "a.json",
        b'{"id": 1}\r\n[1, 2]\n42\n{"id": \n\n{"name": "caf\xff"}\n'
        + b'{"x": "'
        + b"y" * 200
        + b'"}\n',
    )
    zipped = _write(tmp_path / "t" / "b.json.gz", b'{"id": 2}\n{"id": 3}', compress=True)
    rows = classify_lines(read_lines(spark, [plain, zipped]), LineLimits(max_line_bytes=100))
    got = {
        (r._source_file.rsplit("/", 1)[-1], r._line_number): r._reject_reason
        for r in rows.collect()
    }
    assert got == {
        ("a.json", 1): None,
        ("a.json", 2): "not_an_object",
        ("a.json", 3): "not_an_object",
        ("a.json", 4): "unparseable_json",
        ("a.json", 5): "empty_line",
        ("a.json", 6): "invalid_utf8",
        ("a.json", 7): "line_too_long",
        ("b.json.gz", 1): None,
        ("b.json.gz", 2): None,  # no trailing newline: still a line
    }
    accepted = rows.where("_reject_reason is null").selectExpr(
        "variant_get(_variant, '$.id', 'int')"
    )
    assert sorted(r[0] for r in accepted.collect()) == [1, 2, 3]
