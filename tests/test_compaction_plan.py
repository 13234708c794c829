"""What compaction plans, for any set of partitions (ingest/compaction.py, no Spark):
generated days, slots (batch ids and earlier compactions' slots) and file sizes."""

from __future__ import annotations

from datetime import date, timedelta

from hypothesis import given
from hypothesis import strategies as st

from dynamic_ddl.ingest.compaction import (
    SLOT_MARK,
    StoredPartition,
    files_needed,
    merged_slot,
    plan_merges,
)

TARGET = 1000
DAYS = [None, *(date(2026, 11, 1) + timedelta(days=n) for n in range(5))]
BATCH_IDS = st.builds(
    lambda minute, sequence, digest: f"202611{minute:06d}Z{sequence}-{digest}",
    st.integers(0, 999_999),
    st.sampled_from(["", ".0001", ".0002"]),
    st.text("0123456789abcdef", min_size=8, max_size=8),
)
# A slot is a batch's id, or an earlier compaction's (the greatest batch id and a stamp).
SLOTS = st.one_of(
    BATCH_IDS, st.builds(lambda batch, stamp: batch + SLOT_MARK + stamp, BATCH_IDS, BATCH_IDS)
)


@st.composite
def partitions(draw) -> list[StoredPartition]:
    found = {}
    for _ in range(draw(st.integers(0, 25))):
        day = draw(st.sampled_from(DAYS))
        slot = draw(SLOTS)
        files = draw(st.integers(0, 6))
        size = draw(st.integers(0, 3 * TARGET)) if files else 0
        text = None if day is None else day.isoformat()
        found[(text, slot)] = StoredPartition(text, slot, f"p/{text}/{slot}", files, size)
    return list(found.values())


def _batch_part(slot: str) -> str:
    return slot.split(SLOT_MARK)[0]


@given(partitions(), st.sampled_from([None, *DAYS[1:]]))
def test_every_old_day_becomes_one_partition_and_nothing_is_lost_or_taken_twice(
    stored, merge_before
):
    merges = plan_merges(stored, merge_before, TARGET, "20991231T000000000000")
    sources = [p for m in merges for p in m.sources]
    assert len(sources) == len({p.path for p in sources}), "a partition merged twice"
    untouched = [p for p in stored if p not in sources]
    for merge in merges:
        # Every source is of the merge's day; the slot is new and no row's batch is above it.
        assert {p.day for p in merge.sources} == {merge.day}
        assert all(_batch_part(p.slot) < merge.slot for p in merge.sources)
        assert merge.slot not in {p.slot for p in stored}
        assert merge.files == files_needed(sum(p.bytes for p in merge.sources), TARGET)
    after = [(p.day, p.files, p.bytes) for p in untouched]
    after += [(m.day, m.files, sum(p.bytes for p in m.sources)) for m in merges]
    for day in {p.day for p in stored}:
        old = merge_before is not None and (day is None or date.fromisoformat(day) < merge_before)
        count = sum(1 for d, _, _ in after if d == day)
        assert count == 1 if old else count == sum(1 for p in stored if p.day == day)
    # No partition is left with more files than its bytes need.
    assert all(files <= files_needed(size, TARGET) for _, files, size in after)


@given(st.lists(SLOTS, min_size=1, max_size=6), BATCH_IDS)
def test_a_merged_slot_sorts_after_every_batch_it_holds(slots, stamp):
    slot = merged_slot(slots, stamp)
    assert all(_batch_part(s) < slot for s in slots)
    assert _batch_part(slot) == max(_batch_part(s) for s in slots)


def test_a_day_python_cannot_hold_is_planned_not_refused():
    # Found by review: an event time read as year 0 (or before) gave a partition day
    # date.fromisoformat refuses, and every compaction of the table failed.
    old = [
        StoredPartition(day, s, "p", 1, 10) for day in ("0000-12-31", "-0001-01-01") for s in "ab"
    ]
    future = [StoredPartition("+10000-01-01", s, "p", 1, 10) for s in "ab"]
    merges = plan_merges([*old, *future], date(2026, 1, 1), TARGET)
    assert sorted((m.day, len(m.sources)) for m in merges) == [
        ("-0001-01-01", 2),
        ("0000-12-31", 2),
    ]
