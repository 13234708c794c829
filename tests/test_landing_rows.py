"""Raw rows as the Python landing models shape them (landing/rows.py)."""

from __future__ import annotations

from datetime import datetime

from dynamic_ddl.landing.rows import landing_rows
from tests.test_hostile_inbox import ingest, write_lines

RAW = (
    "serial string, updated_at timestamp, deleted boolean, deleted__text string, mode string,"
    " _batch_id string, _slot string, _event_date date"
)


def test_a_delete_marker_raw_kept_as_text_deletes_and_its_companion_is_dropped(spark):
    """A feed that sends `deleted: 1` into a boolean column: raw keeps "1" in
    `deleted__text`, and landing reads it as true, as a column of the union type would."""
    at = datetime(2026, 11, 3, 10, 0)
    raw = spark.createDataFrame(
        [
            ("a", at, None, "1", "idle", "b1", "b1", None),
            ("b", at, True, None, "idle", "b1", "b1", None),
            ("c", at, None, "0", "video", "b1", "b1", None),
            ("d", at, None, "maybe", "photo", "b1", "b1", None),
            ("e", at, None, None, "photo", "b1", "b1", None),
            ("f", at, None, "2.5", "photo", "b1", "b1", None),
            # No key: raw keeps it, landing leaves it out (upserted, all such rows were
            # one with a NULL key, failing the key's not_null test at every build).
            (None, at, None, None, "photo", "b1", "b1", None),
        ],
        RAW,
    )
    rows = landing_rows(raw, "serial", "updated_at", 8, delete_marker="deleted")
    assert rows.columns == ["serial", "updated_at", "mode", "_batch_id", "deleted", "serial_bucket"]
    assert sorted((row.serial, row.deleted) for row in rows.collect()) == [
        ("a", True),
        ("b", True),
        ("c", False),
        ("d", False),  # no boolean in it: not a delete
        ("e", False),
        ("f", True),  # a number: as Spark casts the union column's 2.5, and exact_column
    ]


# A device feed whose first batch sends numbers for the key and epoch seconds for the
# time of its state (`seen`: not the topic's event time, which raw always types as a
# timestamp); later lines send text for both: raw keeps those in `__text` companions.
FIRST = ['{"id": 1, "serial": 7, "ts": "2026-11-01", "seen": 1730000000, "firmware": 3}']
LATER = [
    '{"id": 2, "serial": "SN-A", "ts": "2026-11-02", "seen": "2026-11-02T10:00:00Z"}',
    '{"id": 3, "serial": 8, "ts": "2026-11-02", "seen": "Sun Aug 31 00:29:15 +0000 2014"}',
    '{"id": 4, "serial": "9", "ts": "2026-11-02", "seen": 1730000100000, "firmware": "3.1"}',
]


def test_key_and_event_time_sent_as_text_later_read_as_a_build_from_scratch(spark, tmp_path):
    """Found by review: the key and the event time were read from their column alone.
    Once a batch sent text where the first sent numbers, the key was NULL and the event
    time NULL batch by batch (the text sat in the companions), not from scratch, where
    the column of the union type holds the text: a landing table differing from its
    recompute. Both builds must give the same keys, buckets and event times."""
    landed = {}
    for way in ("batches", "at_once"):
        inbox, schema = tmp_path / way, f"landing_rows_{way}"
        write_lines(inbox, "1.json", FIRST)
        if way == "batches":
            ingest(spark, schema, inbox)
        write_lines(inbox, "2.json", LATER)
        ingest(spark, schema, inbox)
        raw = spark.table(f"{schema}.raw_feed")
        if way == "batches":
            assert {"serial__text", "seen__text"} <= set(raw.columns)
        rows = landing_rows(raw, "serial", "seen", 8).collect()
        landed[way] = sorted((r.id, r.serial, r.seen, r.serial_bucket) for r in rows)
    assert landed["batches"] == landed["at_once"]
    assert [(i, serial) for i, serial, _, _ in landed["batches"]] == [
        (1, "7"),
        (2, "SN-A"),
        (3, "8"),
        (4, "9"),
    ]
    assert all(ts is not None for _, _, ts, _ in landed["batches"])
