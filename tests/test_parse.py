"""Parsing a batch once: every line accepted or given a reason, and numbered when rejected."""

from __future__ import annotations

import gzip

from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dynamic_ddl.ingest.parse import (
    REJECT_REASON,
    LineLimits,
    case_sensitive,
    infer_schema,
    is_strict_json,
    line_numbers,
    line_pieces,
    parse_lines,
    read_text_lines,
)

DEEP = b'{"a": {"b": {"c": {"d": 1}}}}'


def _write(path, payload: bytes, compress: bool = False):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(payload) if compress else payload)
    return str(path)


def test_every_line_is_accepted_or_quarantined_with_its_number(spark, tmp_path):
    plain = _write(
        tmp_path / "t" / "a.json",
        b'{"id": 1}\r\n[1, 2]\n42\n{"id": \n\n{"name": "caf\xff"}\n'
        + b'{"x": "'
        + b"y" * 200
        + b'"}\n'
        + DEEP
        + b"\nnot json\n",
    )
    zipped = _write(tmp_path / "t" / "b.json.gz", b'{"id": 2}\n{"id": 3}', compress=True)
    files = [plain, zipped]
    limits = LineLimits(max_line_bytes=100, max_depth=3)
    counts = Observation()
    parsed = parse_lines(read_text_lines(spark, files), infer_schema(spark, files), limits, counts)
    # Numbers must hold however Spark cuts the files: here into 16-byte pieces,
    # packed together (a line belongs to the piece it starts in).
    spark.conf.set("spark.sql.files.maxPartitionBytes", "16")
    spark.conf.set("spark.sql.files.openCostInBytes", "0")
    try:
        lines = (
            line_numbers(parsed, line_pieces(parsed))
            .select("_source_file", "_line_number", REJECT_REASON, F.col("line").cast("binary"))
            .collect()
        )
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("spark.sql.files.openCostInBytes")

    got = {
        (r._source_file.rsplit("/", 1)[-1], r._line_number): r[REJECT_REASON]
        for r in lines
        if r[REJECT_REASON]
    }
    assert got == {
        ("a.json", 2): "not_an_object",
        ("a.json", 3): "not_an_object",
        ("a.json", 4): "unparseable_json",
        ("a.json", 5): "empty_line",
        ("a.json", 6): "invalid_utf8",
        ("a.json", 7): "line_too_long",
        ("a.json", 8): "nesting_too_deep",
        ("a.json", 9): "unparseable_json",
    }
    # Accepted: line 1 (CRLF) and both gzip lines, the last without a newline.
    numbered = {(r._source_file.rsplit("/", 1)[-1], r._line_number) for r in lines}
    assert numbered - set(got) == {("a.json", 1), ("b.json.gz", 1), ("b.json.gz", 2)}
    assert len(lines) == 11  # every input line (9 + 2), nothing dropped
    # Invalid UTF-8 keeps its exact bytes.
    assert b"caf\xff" in next(r.line for r in lines if r._line_number == 6)
    observed = counts.get
    assert (observed["accepted"], observed["rejected"]) == (3, 8)


def test_parsing_no_fields_judges_lines_like_parsing_all(spark, tmp_path):
    """A line's verdict depends on its text only, not on the schema a batch inferred."""
    path = _write(
        tmp_path / "p.json",
        b'{"a": {"b": 1}, "c": [1]}\n[{"a": 1}]\n{"a": \n\n"s"\n{"a": {"b": 2}} trailing\n'
        + b'{"a": {"b": "x"}}\n{"c": {"d": [1, {"e": 2}]}}\nnull\n',
    )
    lines = read_text_lines(spark, [path])
    schema = infer_schema(spark, [path])

    def verdicts(parse_with: StructType) -> list:
        return parse_lines(lines, parse_with).select(REJECT_REASON).collect()

    assert verdicts(StructType([])) == verdicts(schema)


def test_keys_differing_only_in_case_are_both_inferred(spark, tmp_path):
    path = _write(tmp_path / "c.json", b'{"State": "CA", "state": "ca", "n": null, "e": {}}\n')
    schema = infer_schema(spark, [path])
    # A null key is inferred too (a path gets a column once a record holds a value).
    assert schema.simpleString() == "struct<State:string,n:string,state:string>"


STRICT = ['{"id": 1}', '{"id": 1}  \t', '{"s": "]\\",\\"}"}', '{"a": [1, "x", {"b": null}]}']
LENIENT = [
    '{"id": 1}]{"b": 2}',  # ends the wrapping array early
    '{"id": 1},"x": null',  # continues an object, with nulls only
    '{"id": 1}}x',
    '{"id": 1},"',
    '{"id": 1},',
    '{"id": 1},"abc',
    '{"id": 1},{"id": 2}',
    '{"id": 1} x',
    '{"id": 1, "id": 2}',
    '{"id": NaN}',
    "{'id': 1}",
    '{"s": "\\ud800"}',
]


def test_only_one_strict_json_value_per_line_passes(spark):
    lines = spark.createDataFrame([(line,) for line in STRICT + LENIENT], "line string")
    verdicts = dict(lines.select("line", is_strict_json(F.col("line")).alias("ok")).collect())
    assert [line for line in STRICT + LENIENT if verdicts[line]] == STRICT


class _ConnectClient:
    """A stand-in for a Spark Connect client session: its `newSession` would open a
    server session of its own, which nothing closes."""

    __module__ = "pyspark.sql.connect.session"

    def __init__(self):
        self.settings = {"spark.sql.caseSensitive": "false"}
        self.conf = self
        self.opened: list[_ConnectClient] = []

    def get(self, key):
        return self.settings[key]

    def set(self, key, value):
        self.settings[key] = value

    def newSession(self):  # noqa: N802 - pyspark's name (it succeeds on pyspark 4.3)
        self.opened.append(_ConnectClient())
        return self.opened[-1]


def test_case_sensitive_inference_opens_no_session_on_spark_connect():
    """Found by review: every raw batch on Spark Connect opened a server session (one
    more for a batch holding `""`) and never closed it. The client's own session is set
    case-sensitive for the inference, then set back."""
    client = _ConnectClient()
    with case_sensitive(client) as session:
        assert session is client and client.get("spark.sql.caseSensitive") == "true"
    assert client.get("spark.sql.caseSensitive") == "false" and client.opened == []


def test_case_sensitive_inference_leaves_a_shared_classic_session_as_it_is(spark):
    with case_sensitive(spark) as session:
        assert session is not spark and session.conf.get("spark.sql.caseSensitive") == "true"
    assert spark.conf.get("spark.sql.caseSensitive") == "false"
