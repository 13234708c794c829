"""Property-based tests of raw ingestion: generated JSON text and file names, nothing lost.

Each example writes a few batches of generated files (tests/json_text.py)
into a fresh inbox and ingests them batch by batch through the real
ingestion on the shared SparkSession. After every batch:

- no run fails because of the data, and no batch is left pending;
- per file, the lines Spark's reader splits (LF, CRLF, bare CR) = the
  ledger's count = raw rows + quarantined lines;
- each line is recoverable whole: an accepted line is its raw row's
  `_raw_json`, a rejected one its quarantine entry's text or bytes;
- every value of an accepted record (not null, not an empty object or
  array; "" is a value) is held by its row: in the column of its path (or
  of an enclosing path, once types conflicted) or in `_overflow`. Values
  inside arrays of objects (child tables) are not checked here.

After the last batch, a fresh ingestion of the whole inbox gives columns
to the same JSON paths as the batch-by-batch one.

`make test` runs FUZZ_EXAMPLES (default 12) examples; `make fuzz` many more.
A failure the fuzzer finds stays as an explicit test in test_hostile_inbox.py.
"""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from dynamic_ddl.ingest.job import ingest_topic
from dynamic_ddl.schema.naming import display_path
from tests.json_text import file_name, line_bytes, line_end

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
LIMITS = {"max_line_bytes": 6000, "max_depth": 6, "max_columns": 500}
_SCHEMAS = itertools.count()


def spark_lines(payload: bytes) -> list[bytes]:
    """The lines Spark's text reader splits a file into: at LF, CRLF or a bare CR.

    A UTF-8 byte-order mark that starts the file is not part of its first line.
    """
    lines = re.split(rb"\r\n|\r|\n", payload.removeprefix(b"\xef\xbb\xbf"))
    return lines[:-1] if lines[-1] == b"" else lines


@st.composite
def batch(draw) -> dict[str, bytes]:
    """Files of one batch: name -> bytes (each line ended as feeds end them)."""
    names = draw(st.lists(file_name(), min_size=1, max_size=3, unique_by=str.lower))
    files = {}
    for name in names:
        lines = draw(st.lists(st.tuples(line_bytes(), line_end()), min_size=1, max_size=6))
        files[name] = b"".join(line + end for line, end in lines)
    return files


def _local_path(uri: str) -> str:
    """A `_metadata.file_path` URI as the local path the ledger records."""
    return unquote(urlparse(uri).path)


def _strict(line: bytes):
    """The record as RFC 8259 reads it, or None: repeated keys and NaN refused."""

    def no_repeats(pairs):
        keys = [key for key, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError("repeated key")
        return dict(pairs)

    def refuse(token):
        raise ValueError(token)

    try:
        return json.loads(line, object_pairs_hook=no_repeats, parse_constant=refuse)
    except ValueError:
        return None


def _leaves(value, path=()):
    """(path, value) of every value outside arrays of objects: not null, not empty."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(inner, (*path, key))
    elif isinstance(value, list):
        if value and path and not any(isinstance(item, dict) for item in value):
            yield path, value
    elif value is not None and path:
        yield path, value


def _elements(value, path=()):
    """(array path, element count) of every array of objects, outside other arrays."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _elements(inner, (*path, key))
    elif isinstance(value, list) and any(isinstance(item, dict) for item in value):
        yield path, len(value)


def check_batch(spark, schema: str, inbox: Path, files: dict[str, bytes]) -> None:
    """The properties of the module docstring, for the files of one batch."""
    ledger = {
        row.path: row
        for row in spark.table(f"{schema}.raw_file_ledger").collect()
        if row.path in {str(inbox / "feed" / name) for name in files}
    }
    assert {row.state for row in ledger.values()} == {"committed"}
    raw = spark.table(f"{schema}.raw_feed")
    quarantine = spark.table(f"{schema}.raw_quarantine").where(F.col("topic") == "feed")
    registry = {
        tuple(row.json_keys): row.column_name
        for row in spark.table(f"{schema}.raw_schema_registry")
        .where("table_name = 'raw_feed'")
        .collect()
    }
    for name, payload in files.items():
        path = str(inbox / "feed" / name)
        lines = spark_lines(payload)
        assert ledger[path].line_count == len(lines), name
        rows = [r for r in raw.collect() if _local_path(r._source_file) == path]
        held = [
            r
            for r in quarantine.collect()
            if _local_path(r.source_file) == path and r.batch_id == ledger[path].batch_id
        ]
        rows = [r for r in rows if r._batch_id == ledger[path].batch_id]
        assert len(rows) + len(held) == len(lines), name
        rejected = {}
        for entry in held:
            text = base64.b64decode(entry.raw_base64) if entry.raw_base64 else None
            rejected[entry.line_number] = text or entry.raw_text.encode("utf-8")
        for number, text in rejected.items():
            assert lines[number - 1] == text, (name, number)
        accepted = [line for number, line in enumerate(lines, 1) if number not in rejected]
        assert sorted(r._raw_json.encode("utf-8") for r in rows) == sorted(accepted), name
        for row in rows:
            check_values(row, registry)


def check_values(row, registry: dict[tuple, str]) -> None:
    """Every non-null value of the row's record is in a column or in `_overflow`."""
    record = _strict(row._raw_json)
    assert isinstance(record, dict), f"accepted a line that is not a JSON object: {row._raw_json}"
    overflow = row._overflow or {}
    values = row.asDict()
    for path, _ in _leaves(record):
        prefixes = [path[:end] for end in range(len(path), 0, -1)]
        in_column = any(
            prefix in registry and values.get(registry[prefix]) is not None for prefix in prefixes
        )
        in_overflow = any(display_path(prefix) in overflow for prefix in prefixes)
        under_array = any(isinstance(_at(record, prefix), list) for prefix in prefixes[1:])
        assert in_column or in_overflow or under_array, f"lost {path} of {row._raw_json}"


def _at(record, path):
    for key in path:
        record = record.get(key) if isinstance(record, dict) else None
    return record


def ingest(spark, schema: str, inbox: Path) -> None:
    config = {
        "topic": "feed",
        "record_key": ["id"],
        "event_time": "ts",
        "inbox_dir": str(inbox),
        "schema": schema,
        "table": "raw_feed",
        **LIMITS,
    }
    ingest_topic(spark, config).collect()


def column_paths(spark, schema: str) -> set[tuple]:
    rows = spark.table(f"{schema}.raw_schema_registry").collect()
    return {(row.table_name == "raw_feed", tuple(row.json_keys)) for row in rows}


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
@given(batches=st.lists(batch(), min_size=1, max_size=3))
def test_generated_input_is_never_lost(spark, batches):
    number = next(_SCHEMAS)
    schema, fresh = f"fuzz_{number}", f"fuzz_{number}_fresh"
    inbox = Path(tempfile.mkdtemp(prefix="fuzz-inbox-"))
    try:
        for database in (schema, fresh):
            spark.sql(f"drop database if exists {database} cascade")
            spark.sql(f"create database {database}")
        for index, files in enumerate(batches):
            folder = inbox / "feed" / f"b{index}"
            folder.mkdir(parents=True)
            for name, payload in files.items():
                zipped = gzip.compress(payload) if name.endswith(".gz") else payload
                (folder / name).write_bytes(zipped)
            ingest(spark, schema, inbox)
            check_batch(spark, schema, inbox, {f"b{index}/{n}": p for n, p in files.items()})
        ingest(spark, fresh, inbox)
        assert column_paths(spark, fresh) == column_paths(spark, schema)
    finally:
        for database in (schema, fresh):
            spark.sql(f"drop database if exists {database} cascade")
        shutil.rmtree(inbox, ignore_errors=True)
