"""Classified lines to raw and quarantine rows: nothing lost, hostile keys kept apart."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from dynamic_ddl.ingest.lines import classify_lines, read_lines
from dynamic_ddl.ingest.raw_rows import (
    BatchContext,
    batch_schema,
    quarantine_rows,
    raw_rows,
    storable_leaves,
)
from dynamic_ddl.schema.registry import plan_schema


def _plan(leaves, max_columns=100):
    return plan_schema([], leaves, "t", "b1", max_columns)


LINES = [
    b'{"id": 1, "ts": "2026-11-01T10:00:00Z", "Name": "A", "name": "a", "a.b": 1,'
    b' "n": {"deep": true}}',
    b'{"id": "x-2", "ts": "2026-11-02T23:59:59Z", "always_null": null,'
    b' "big": 123456789012345678901}',
    b'{"id": 3, "ts": "not a time", "quote\'s": "q", "both\'\\"": "b",'
    b' "emoji \xf0\x9f\x93\xb7": "cam", "long": "' + b"z" * 5000 + b'"}',
    b"[1, 2, 3]",
    b'{"broken": ',
]
CONTEXT = BatchContext(
    topic="t",
    batch_id="b1",
    ingested_at=datetime(2026, 11, 21, tzinfo=UTC),
    event_time=("ts",),
)


@pytest.fixture(scope="module")
def classified(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("inbox") / "part-0.json"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    return classify_lines(read_lines(spark, [str(path)])).cache()


@pytest.fixture(scope="module")
def leaves(classified):
    """The batch's storable leaves: one schema aggregate for the whole module."""
    return storable_leaves(batch_schema(classified))


def test_every_line_is_a_raw_row_or_a_quarantine_row(classified, leaves):
    raw = raw_rows(classified, CONTEXT, leaves, _plan(leaves))
    quarantine = quarantine_rows(classified, CONTEXT)
    assert raw.count() + quarantine.count() == len(LINES)
    assert sorted(r.reason for r in quarantine.collect()) == ["not_an_object", "unparseable_json"]
    assert {r.line_number for r in quarantine.collect()} == {4, 5}


def test_hostile_keys_and_conflicts_keep_every_value(classified, leaves):
    plan = _plan(leaves)
    names = plan.column_names()
    rows = {
        r._line_number: r.asDict() for r in raw_rows(classified, CONTEXT, leaves, plan).collect()
    }
    assert [rows[n][names[("id",)]] for n in (1, 2, 3)] == [
        "1",
        "x-2",
        "3",
    ]  # int and string -> text
    assert rows[1][names[("Name",)]] == "A" and rows[1][names[("name",)]] == "a"
    assert rows[1][names[("a.b",)]] == 1 and rows[1][names[("n", "deep")]] is True
    assert rows[2][names[("big",)]] == 123456789012345678901  # no overflow to NULL
    assert rows[3][names[("quote's",)]] == "q" and rows[3][names[("both'\"",)]] == "b"
    assert rows[3][names[("emoji 📷",)]] == "cam" and len(rows[3][names[("long",)]]) == 5000
    assert ("always_null",) not in names  # no type yet; the value stays in _raw_json
    assert str(rows[1]["_event_date"]) == "2026-11-01"
    assert rows[3]["_event_date"] is None  # unparseable time: kept, not dated
    assert rows[3]["_raw_json"].startswith('{"id": 3')


def test_columns_over_the_cap_go_to_the_overflow_map(classified, leaves):
    plan = _plan(leaves, max_columns=3)
    overflow = plan.overflow
    assert len(plan.column_names()) == 3 and len(overflow) == len(leaves) - 3
    rows = raw_rows(classified, CONTEXT, leaves, plan).orderBy("_line_number").collect()
    first_overflow = rows[0]["_overflow"]
    assert first_overflow and set(first_overflow) <= {".".join(leaf.path) for leaf in overflow}
    assert set(rows[0].asDict()) >= {"_overflow", "_batch_id", "_source_file", "_raw_json"}
