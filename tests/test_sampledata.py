"""The sample generator: deterministic, drifting, with a small share of malformed lines."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dynamic_ddl.sampledata.__main__ import main
from dynamic_ddl.sampledata.generator import MALFORMED_RATE, TOPICS, GeneratorConfig, generate
from dynamic_ddl.sampledata.reference import load_reference


def _lines(root: Path, topic: str) -> list[bytes]:
    lines = []
    for path in sorted((root / topic).rglob("part-*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            lines.extend(handle.read().splitlines())
    return lines


def _records(lines: list[bytes]) -> list[dict]:
    records = []
    for line in lines:
        try:
            value = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plain(record: dict) -> dict:
    """A record as drawn, before respelling (generator.respelled): times as ISO text,
    revision 2.0 as 2, a delete marker 1 as true."""
    record = json.loads(json.dumps(record))
    if "_data" in record:
        data = record["_data"]
        if isinstance(data["log_ts"], int):
            data["log_ts"] = _iso(data["log_ts"] / 1000)
        if data["event"].get("revision") == 2:
            data["event"]["revision"] = 2
    for holder, field in (
        (record.get("_data", {}), "log_ts"),
        (record, "log_ts"),
        (record, "updated_at"),
    ):
        if "/" in str(holder.get(field)):
            slashed = datetime.strptime(holder[field], "%Y/%m/%d %H:%M:%S").replace(tzinfo=UTC)
            holder[field] = _iso(slashed.timestamp())
    if record.get("deleted") == 1:
        record["deleted"] = True
    return record


@pytest.fixture(scope="module")
def reference():
    return load_reference()


def test_same_seed_writes_identical_bytes(tmp_path, reference):
    for name in ("a", "b"):
        generate(GeneratorConfig(out_dir=tmp_path / name, events=300, seed=7), reference)
    for topic in TOPICS:
        assert _lines(tmp_path / "a", topic) == _lines(tmp_path / "b", topic)
    generate(GeneratorConfig(out_dir=tmp_path / "c", events=300, seed=8), reference)
    assert _lines(tmp_path / "a", "device_events") != _lines(tmp_path / "c", "device_events")


def test_files_land_in_topic_and_day_folders(tmp_path, reference):
    counts = generate(GeneratorConfig(out_dir=tmp_path, events=500), reference)
    days = sorted(p.name for p in (tmp_path / "device_events").iterdir())
    assert days == ["dt=2026-11-01", "dt=2026-11-02", "dt=2026-11-03"]
    assert len(_lines(tmp_path, "device_events")) == counts["device_events"]["lines"] == 500
    first = _records(_lines(tmp_path, "device_events"))[0]
    assert set(first) == {"_data"}
    assert {"record", "device", "gps", "media", "log_ts"} <= set(first["_data"])


def test_batch_two_drifts_the_schema(tmp_path, reference):
    generate(GeneratorConfig(out_dir=tmp_path, events=400, batch=1), reference)
    generate(GeneratorConfig(out_dir=tmp_path, events=400, batch=2), reference)
    by_batch: dict[str, list[dict]] = {"b001": [], "b002": []}
    for path in (tmp_path / "device_events").rglob("part-*"):
        by_batch[path.name.split("-")[1]].extend(map(_plain, _records(_lines_of(path))))
    first = by_batch["b001"]
    # Batch 2's own events (it also sends some of batch 1's again, as they were).
    second = [r for r in by_batch["b002"] if r["_data"]["event"]["id"].startswith("e2-")]
    resent = [r for r in by_batch["b002"] if r["_data"]["event"]["id"].startswith("e1-")]
    assert all(isinstance(r["_data"]["record"]["id"], int) for r in first)
    assert all(isinstance(r["_data"]["record"]["id"], str) for r in second)
    assert all("alt_m" in r["_data"]["gps"] for r in first)
    assert not any("alt_m" in r["_data"]["gps"] for r in second)
    assert all("cycle_count" in r["_data"]["device"]["battery"] for r in second)
    assert all("gyro" in r["_data"]["device"]["sensors"]["imu"] for r in second)
    keys_1 = {r["record_key"] for r in _records(_lines(tmp_path, "app_attributes"))}
    assert {"theme", "subscription_tier"} <= keys_1  # batch 2's new keys are present overall
    late_day = tmp_path / "device_events" / "dt=2026-11-03"
    assert {p.name.split("-")[1] for p in late_day.iterdir()} == {"b001", "b002"}
    # Corrections (another firmware, revision 2) and duplicates of batch 1's last day.
    originals = {r["_data"]["event"]["id"]: r for r in first}
    corrected = [r for r in resent if r["_data"]["event"].get("revision") == 2]
    duplicated = [r for r in resent if "revision" not in r["_data"]["event"]]
    assert corrected and duplicated
    for record in corrected:
        original = originals[record["_data"]["event"]["id"]]["_data"]["device"]
        assert record["_data"]["device"]["firmware"] != original["firmware"]
    # Some corrections move the event to the day before (a device clock a day ahead).
    moved = [r for r in corrected if r["_data"]["log_ts"][:10] == "2026-11-02"]
    assert moved and len(moved) < len(corrected)
    for record in moved:
        original = originals[record["_data"]["event"]["id"]]["_data"]
        assert original["log_ts"][:10] == "2026-11-03"
        assert original["log_ts"][10:] == record["_data"]["log_ts"][10:]
    # Some corrections drop a media file sent by mistake; some originals come again after
    # their correction (a stale retry).
    assert any(
        len(r["_data"]["media"]) < len(originals[r["_data"]["event"]["id"]]["_data"]["media"])
        for r in corrected
    )
    retried = {r["_data"]["event"]["id"] for r in duplicated}
    assert retried & {r["_data"]["event"]["id"] for r in corrected}
    # The rest are exact duplicates, or conflicts: the same revision, another battery level.
    conflicting = [r for r in duplicated if originals[r["_data"]["event"]["id"]] != r]
    assert conflicting and len(conflicting) < len(duplicated)
    for record in conflicting:
        original = json.loads(json.dumps(originals[record["_data"]["event"]["id"]]))
        battery = record["_data"]["device"]["battery"]
        assert battery["level_pct"] != original["_data"]["device"]["battery"]["level_pct"]
        original["_data"]["device"]["battery"]["level_pct"] = battery["level_pct"]
        assert original == record


def test_later_batches_send_some_fields_in_another_json_type_with_the_same_value(
    tmp_path, reference
):
    """Batch 1 sends `revision: 1` and `deleted: false` on some records; batch 2 sends,
    on some records, times as epoch numbers, a revision as 2.0, a delete marker as 1."""
    for batch in (1, 2):
        generate(GeneratorConfig(out_dir=tmp_path, events=2000, batch=batch), reference)

    def batch_records(topic: str, batch: int) -> list[dict]:
        paths = (tmp_path / topic).rglob(f"part-b00{batch}-*")
        return [record for path in paths for record in _records(_lines_of(path))]

    events = [r["_data"] for r in batch_records("device_events", 1)]
    assert 0 < sum(e["event"].get("revision") == 1 for e in events) < len(events)
    states = batch_records("device_state", 1)
    assert 0 < sum(s.get("deleted") is False for s in states) < len(states)

    events = [r["_data"] for r in batch_records("device_events", 2)]
    epoch = [e for e in events if isinstance(e["log_ts"], int)]
    slashed = [e for e in events if "/" in str(e["log_ts"])]
    assert epoch and slashed and len(epoch + slashed) < len(events) / 5
    assert all(e["log_ts"] > 10**12 for e in epoch)  # milliseconds
    assert any(isinstance(e["event"].get("revision"), float) for e in events)
    states = batch_records("device_state", 2)
    assert any("/" in s["updated_at"] for s in states)
    assert any(s.get("deleted") == 1 and s["deleted"] is not True for s in states)
    assert any("/" in r["log_ts"] for r in batch_records("app_attributes", 2))


def test_batch_two_sends_attributes_of_batch_one_apart(tmp_path, reference):
    for batch in (1, 2):
        generate(GeneratorConfig(out_dir=tmp_path, events=400, batch=batch), reference)
    groups: dict[tuple, dict[str, set]] = {}
    for path in (tmp_path / "app_attributes").rglob("part-*"):
        for record in map(_plain, _records(_lines_of(path))):
            keys = groups.setdefault((record["id"], record["log_ts"]), {})
            keys.setdefault(path.name.split("-")[1], set()).add(record["record_key"])
    split = [keys for keys in groups.values() if len(keys) == 2]
    # Another key, or app_version sent again (with a hotfix's version: the newest wins).
    apart = [keys for keys in split if not keys["b001"] & keys["b002"]]
    again = [keys for keys in split if keys["b001"] & keys["b002"]]
    assert apart and again
    assert all(keys["b001"] & keys["b002"] == keys["b002"] == {"app_version"} for keys in again)


def _lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_device_state_has_late_updates(tmp_path, reference):
    generate(GeneratorConfig(out_dir=tmp_path, events=2000), reference)
    records = _records(_lines(tmp_path, "device_state"))
    latest_seen: dict[str, str] = {}
    late = 0
    for record in records:
        previous = latest_seen.get(record["serial"], "")
        late += record["updated_at"] < previous
        latest_seen[record["serial"]] = max(previous, record["updated_at"])
    assert late > 0


def test_malformed_share_is_small_and_every_kind_appears(tmp_path, reference):
    counts = generate(GeneratorConfig(out_dir=tmp_path, events=20_000), reference)
    lines = _lines(tmp_path, "device_events")
    bad = [line for line in lines if not _is_object(line)]
    assert len(bad) == counts["device_events"]["malformed"]
    assert 0.5 * MALFORMED_RATE < len(bad) / len(lines) < 2 * MALFORMED_RATE
    assert any(line.startswith(b"[") for line in bad)
    assert any(_is_invalid_utf8(line) for line in bad)
    assert any(_is_scalar(line) for line in bad)


def _is_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line.decode("utf-8")), dict)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False


def _is_invalid_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _is_scalar(line: bytes) -> bool:
    try:
        return not isinstance(json.loads(line), dict | list)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False


def test_cli_writes_gzip_and_reports_counts(tmp_path, capsys):
    assert main(["--out", str(tmp_path), "--events", "100", "--gzip", "--file-events", "20"]) == 0
    files = list((tmp_path / "device_events").rglob("*.json.gz"))
    assert len(files) >= 5  # 100 lines, at most 20 per file
    assert len(_lines(tmp_path, "device_events")) == 100
    assert "device_events: 100 lines" in capsys.readouterr().out


def test_make_data_writes_nothing_beside_files_already_in_the_inbox(tmp_path, capsys):
    own = tmp_path / "device_events" / "dt=2026-11-01" / "mine.json"
    own.parent.mkdir(parents=True)
    own.write_text('{"id": 1}\n')
    assert main(["--out", str(tmp_path), "--events", "100", "--if-empty"]) == 0
    assert [path for path in tmp_path.rglob("*") if path.is_file()] == [own]
    assert "no sample data written" in capsys.readouterr().err

    (tmp_path / ".batch-1").touch()  # a hidden file alone (an old stamp) is no data
    own.unlink()
    assert main(["--out", str(tmp_path), "--events", "100", "--if-empty"]) == 0
    assert _lines(tmp_path, "device_events")


def test_cli_rejects_a_nonpositive_scale(capsys):
    with pytest.raises(SystemExit):
        main(["--events", "0"])
    assert "--events" in capsys.readouterr().err
