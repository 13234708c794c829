"""Raw rows as the Python landing models shape them (landing/rows.py)."""

from __future__ import annotations

from datetime import datetime

from dynamic_ddl.landing.rows import landing_rows

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
