"""Deterministic sample JSON for the three topics, with drift and malformed lines.

Batch 1 is the base shape. Batch 2 and later drift the way real providers do:
`device_events` gains attributes, turns `_data.record.id` from an int into a
string, drops `_data.gps.alt_m` and nests deeper; `app_attributes` gains keys;
`device_state` gains a delete marker. Later batches also carry late events for
days already delivered, and what feeds send about the previous batch's last
day: corrections of its events (another firmware, `revision: 2`), exact
duplicates of them, and attributes of its app records sent apart (the same
`id` and `log_ts`, another key). And the conflicts a build from scratch must
resolve as incremental runs do: an event sent again with the same revision
and another battery level, an original sent again after its correction (a
stale retry: the correction still wins), an app key sent again with another value (often
a smaller one: the newest wins, not the greatest), a device state sent again
with the same `updated_at` and another mode. Some fields change JSON type but
not meaning (`respelled`): times as epoch numbers, a revision as `2.0`, a
delete marker as `1`, after batch 1 sent `revision: 1` and `deleted: false`
on some records. About 0.5% of lines in every file are malformed (see
MALFORMED_KINDS); every line is still one line, so line counts stay exact.
"""

from __future__ import annotations

import gzip
import json
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from dynamic_ddl.sampledata.reference import Reference

TOPICS = ("device_events", "app_attributes", "device_state")
MALFORMED_RATE = 0.005
MALFORMED_KINDS = ("truncated_json", "json_array", "json_scalar", "invalid_utf8")
FIRST_DAY = date(2026, 11, 1)
DAYS_PER_BATCH = 3

FIRST_NAMES = ["John", "Ana", "Wei", "Priya", "Lars", "Amara", "Diego", "Yuki", "Sofia", "Omar"]
LAST_NAMES = ["Fork", "Silva", "Chen", "Patel", "Berg", "Okafor", "Ruiz", "Sato", "Rossi", "Haddad"]
PLACES = [
    ("California", "san Mateo"),
    ("Texas", "Austin"),
    ("Ontario", "Toronto"),
    ("Bavaria", "Munich"),
    ("Tokyo", "Shibuya"),
    ("New South Wales", "Sydney"),
]
EVENT_TYPES = ["power_on", "capture", "capture", "capture", "upload", "error"]
MEDIA_TYPES = ["video", "photo", "timelapse"]
BASE_KEYS = ["first_name", "last_name", "city", "state", "email", "language", "app_version"]
DRIFT_KEYS = ["theme", "notifications_enabled", "subscription_tier", "storage_used_gb"]
CORRECTED_SHARE = 0.05  # of the previous batch's last-day events, sent again corrected
DUPLICATED_SHARE = 0.02  # ... sent again unchanged
CLOCK_FIXED_SHARE = 0.3  # of the corrections: the time moves a day back too
SPLIT_SHARE = 0.1  # of its last-day app records, given one more key apart
CONFLICT_SHARE = 0.05  # of its last-day events: sent again with another battery level
RESENT_STATE_SHARE = 0.15  # of its last-day states: sent again with another mode
RESENT_KEY_SHARE = 0.3  # of its last-day app records with an app_version: sent again
MEDIA_DROPPED_SHARE = 0.5  # of the corrections of events with several media: the last dropped
STALE_SHARE = 0.3  # of the corrections: the original sent again after them (a stale retry)
EXPLICIT_SHARE = 0.1  # of batch 1's events and states: `revision: 1`, `deleted: false` sent
RESPELLED_SHARE = 0.05  # of later batches' records: a field in another JSON type, same value
RESPELLED_FEW_SHARE = 0.5  # of later batches' deletes and corrections (few): `1`, `2.0`


@dataclass(frozen=True)
class Device:
    serial: str
    model: str
    firmware: str
    country: str
    owner_id: int
    first_name: str
    last_name: str
    state: str
    city: str


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate: `events` device events per batch; the other topics scale with it."""

    out_dir: Path
    events: int = 2000
    batch: int = 1
    seed: int = 42
    gzip: bool = False
    file_events: int = 50_000


def fleet(reference: Reference, seed: int, size: int) -> list[Device]:
    """The same devices for every batch of one seed."""
    rng = random.Random(seed)
    models = sorted(reference.firmware_by_model)
    devices = []
    for index in range(size):
        model = rng.choice(models)
        state, city = rng.choice(PLACES)
        devices.append(
            Device(
                serial=f"SN{rng.getrandbits(40):010X}",
                model=model,
                firmware=rng.choice(reference.firmware_by_model[model] or ["0.0.0"]),
                country=rng.choice(reference.countries),
                owner_id=index + 1,
                first_name=rng.choice(FIRST_NAMES),
                last_name=rng.choice(LAST_NAMES),
                state=state,
                city=city,
            )
        )
    return devices


def batch_days(batch: int) -> list[date]:
    """Days a batch covers: its own three, plus (after batch 1) the last day of the previous."""
    start = FIRST_DAY + timedelta(days=DAYS_PER_BATCH * (batch - 1))
    days = [start + timedelta(days=offset) for offset in range(DAYS_PER_BATCH)]
    return ([start - timedelta(days=1)] if batch > 1 else []) + days


def _timestamp(rng: random.Random, day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(
        seconds=rng.randrange(86_400)
    )


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def device_event(
    rng: random.Random, device: Device, moment: datetime, batch: int, seq: int
) -> dict:
    """One nested event in the envelope of the Dynamic DDL talk."""
    event_type = rng.choice(EVENT_TYPES + (["firmware_update"] if batch > 1 else []))
    record = {
        "id": device.owner_id,
        "first_name": device.first_name,
        "last_name": device.last_name,
        "state": device.state,
        "city": device.city,
        "email": f"{device.first_name}.{device.last_name}{device.owner_id}@example.com".lower(),
    }
    battery = {
        "level_pct": rng.randint(3, 100),
        "temperature_c": round(rng.uniform(18, 48), 1),
        "charging": rng.random() < 0.2,
    }
    gps = {"lat": round(rng.uniform(-60, 70), 5), "lon": round(rng.uniform(-170, 170), 5)}
    media = []
    if event_type == "capture":
        media = [
            {
                "media_id": f"m{batch}-{seq}-{i}",
                "type": rng.choice(MEDIA_TYPES),
                "duration_s": round(rng.uniform(0, 300), 1),
                "size_bytes": rng.randint(10**5, 4 * 10**9),
            }
            for i in range(rng.randint(1, 3))
        ]
    data = {
        "event": {"id": f"e{batch}-{seq:09d}", "type": event_type},
        "record": record,
        "device": {
            "serial": device.serial,
            "model": device.model,
            "firmware": device.firmware,
            "battery": battery,
        },
        "gps": gps,
        "country": device.country,
        "ip": f"198.51.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
        "media": media,
        "log_ts": _iso(moment),
    }
    if batch == 1:
        gps["alt_m"] = round(rng.uniform(0, 3000), 1)
    else:
        record["id"] = str(device.owner_id)  # the provider turned an int into a string
        battery["cycle_count"] = rng.randint(1, 900)  # a new attribute
        data["network"] = {
            "type": rng.choice(["wifi", "ble", "lte"]),
            "rssi": rng.randint(-90, -30),
        }
        data["device"]["sensors"] = {
            "imu": {
                "gyro": {
                    "x": round(rng.gauss(0, 1), 3),
                    "y": round(rng.gauss(0, 1), 3),
                    "z": round(rng.gauss(0, 1), 3),
                }
            }
        }  # deeper
    return {"_data": data}


def corrected_event(rng: random.Random, event: dict, devices: list[Device]) -> dict:
    """`event` as its provider corrects it: another firmware of the same model (the event
    moves to another daily group), marked `revision: 2`; for some, the time too (the
    device clock ran a day ahead: the event moves to the day before); for some with
    several media files, the last file dropped (sent by mistake)."""
    corrected = json.loads(json.dumps(event))
    device = corrected["_data"]["device"]
    others = sorted(
        {d.firmware for d in devices if d.model == device["model"]} - {device["firmware"]}
    )
    device["firmware"] = rng.choice(others) if others else device["firmware"] + "-fix"
    corrected["_data"]["event"]["revision"] = 2
    if rng.random() < CLOCK_FIXED_SHARE:
        logged = _moment(corrected["_data"]["log_ts"])
        corrected["_data"]["log_ts"] = _iso(logged - timedelta(days=1))
    media = corrected["_data"]["media"]
    if len(media) > 1 and rng.random() < MEDIA_DROPPED_SHARE:
        media.pop()
    return corrected


def resent_events(config: GeneratorConfig, devices: list[Device]) -> Iterator[tuple[date, dict]]:
    """Events of the previous batch's last day sent again: corrected, or duplicated."""
    if config.batch < 2:
        return
    rng = random.Random(f"{config.seed}-{config.batch}-resent")
    previous = replace(config, batch=config.batch - 1)
    last_day = batch_days(previous.batch)[-1]
    for day, event in topic_records("device_events", previous, devices):
        if day != last_day:
            continue
        draw = rng.random()
        if draw < CORRECTED_SHARE:
            yield day, corrected_event(rng, event, devices)
            if rng.random() < STALE_SHARE:  # a retry of the original, after its correction
                yield day, event
        elif draw < CORRECTED_SHARE + DUPLICATED_SHARE:
            yield day, event
        elif draw < CORRECTED_SHARE + DUPLICATED_SHARE + CONFLICT_SHARE:
            yield day, conflicting_event(event)


def conflicting_event(event: dict) -> dict:
    """`event` sent again with the same revision and another battery level: no field
    tells which is right, so the later line wins (in a build from scratch too)."""
    conflicting = json.loads(json.dumps(event))
    battery = conflicting["_data"].setdefault("device", {}).setdefault("battery", {})
    battery["level_pct"] = (int(battery.get("level_pct") or 0) + 50) % 101
    return conflicting


def resent_states(config: GeneratorConfig, devices: list[Device]) -> Iterator[tuple[date, dict]]:
    """States of the previous batch's last day sent again with the same `updated_at` and
    another mode: the later line wins, in a build from scratch too."""
    if config.batch < 2:
        return
    rng = random.Random(f"{config.seed}-{config.batch}-resent-states")
    previous = replace(config, batch=config.batch - 1)
    last_day = batch_days(previous.batch)[-1]
    for day, record in topic_records("device_state", previous, devices):
        if day == last_day and rng.random() < RESENT_STATE_SHARE and not record.get("deleted"):
            resent = json.loads(json.dumps(record))
            modes = sorted({"video", "photo", "idle"} - {resent["state"]["mode"]})
            resent["state"]["mode"] = rng.choice(modes)
            yield day, resent


def split_attributes(config: GeneratorConfig, devices: list[Device]) -> Iterator[tuple[date, dict]]:
    """For some app records of the previous batch's last day, one more key of the same
    `id` and `log_ts`, sent apart (a pivot row completed by a later batch)."""
    if config.batch < 2:
        return
    rng = random.Random(f"{config.seed}-{config.batch}-split")
    previous = replace(config, batch=config.batch - 1)
    last_day = batch_days(previous.batch)[-1]
    owners = {str(d.owner_id): d for d in devices}
    groups: dict[tuple[str, str], set[str]] = {}
    for day, record in topic_records("app_attributes", previous, devices):
        if day == last_day:
            groups.setdefault((record["id"], record["log_ts"]), set()).add(record["record_key"])
    for (owner, log_ts), keys in groups.items():
        missing = sorted(set(BASE_KEYS + DRIFT_KEYS) - keys)
        draw = rng.random()
        if draw < SPLIT_SHARE and missing:
            key = rng.choice(missing)
            value = attribute_values(rng, owners[owner], config.batch)[key]
        elif draw < SPLIT_SHARE + RESENT_KEY_SHARE and "app_version" in keys:
            # Sent again with a hotfix's version, which sorts below the one sent first.
            key, value = "app_version", f"5.{previous.batch}.0-hotfix"
        else:
            continue
        yield (
            last_day,
            {"record_key": key, "record_value": value, "id": owner, "log_ts": log_ts},
        )


def attribute_values(rng: random.Random, device: Device, batch: int) -> dict[str, str]:
    """Every attribute an app user can report, as text."""
    return {
        "first_name": device.first_name,
        "last_name": device.last_name,
        "city": device.city,
        "state": device.state,
        "email": f"user{device.owner_id}@example.com",
        "language": rng.choice(["en", "de", "ja", "pt"]),
        "app_version": f"5.{batch}.{rng.randint(0, 9)}",
        "theme": rng.choice(["dark", "light"]),
        "notifications_enabled": rng.choice(["true", "false"]),
        "subscription_tier": rng.choice(["free", "plus", "pro"]),
        "storage_used_gb": str(round(rng.uniform(0, 500), 2)),
    }


def app_attribute_records(
    rng: random.Random, device: Device, moment: datetime, batch: int
) -> list[dict]:
    """Key/value records for one app user; the key set grows in later batches."""
    values = attribute_values(rng, device, batch)
    keys = BASE_KEYS + (DRIFT_KEYS if batch > 1 else [])
    chosen = rng.sample(keys, k=rng.randint(2, 4))
    return [
        {
            "record_key": key,
            "record_value": values[key],
            "id": str(device.owner_id),
            "log_ts": _iso(moment),
        }
        for key in chosen
    ]


def firmware_in_batch(device: Device, batch: int) -> str:
    """The firmware a device reports in a batch: from batch 2 on, about a quarter of the
    fleet has installed a patch release (1.8.0 -> 1.8.1), for a firmware history to keep.
    Its own random stream, so every other value of the sample stays as it was.

    Example:
        >>> firmware_in_batch(Device("SN1", "AC10", "1.8.0", "US", 1, "", "", "", ""), 1)
        '1.8.0'
    """
    if batch < 2 or random.Random(f"{device.serial}-firmware").random() >= 0.25:
        return device.firmware
    head, _, patch = device.firmware.rpartition(".")
    return f"{head}.{int(patch) + 1}" if head and patch.isdigit() else f"{device.firmware}.1"


def device_state_record(rng: random.Random, device: Device, moment: datetime, batch: int) -> dict:
    """A state snapshot keyed by serial; `updated_at` orders updates, which may arrive late."""
    record = {
        "serial": device.serial,
        "state": {
            "battery_pct": rng.randint(0, 100),
            "storage_free_mb": rng.randint(0, 256_000),
            "firmware": firmware_in_batch(device, batch),
            "mode": rng.choice(["video", "photo", "idle"]),
        },
        "updated_at": _iso(moment),
    }
    if batch > 1 and rng.random() < 0.02:
        record["deleted"] = True  # device decommissioned
    return record


def malformed_line(rng: random.Random, good: bytes) -> tuple[bytes, str]:
    """A broken variant of a good line, and the kind of damage."""
    kind = rng.choice(MALFORMED_KINDS)
    if kind == "truncated_json":
        return good[: max(1, len(good) // 2)], kind
    if kind == "json_array":
        return b"[" + good + b"]", kind
    if kind == "json_scalar":
        return json.dumps(rng.choice([42, "device offline", True, None])).encode(), kind
    return good.replace(b'"', b'"\xff\xfe', 1), kind


def respelled(topic: str, record: dict, batch: int) -> dict:
    """`record` with a field in another JSON type that means the same, as feeds do.

    In batch 1 the defaults (`revision: 1`, `deleted: false`), so those fields get
    their column types; in later batches a revision as `2.0`, a delete marker as
    `1`, and an event time as epoch milliseconds (half the events) or as
    `yyyy/MM/dd HH:mm:ss` text (the other events, states and attributes). Raw
    reads an event time in either into its column; it keeps `2.0` and `1` in
    their columns' `__text` companions, from which landing must read them.

    Example:
        >>> respelled("device_state", {"updated_at": "2026-11-01T00:00:01Z"}, batch=2)
        {'updated_at': '2026/11/01 00:00:01'}
    """
    record = json.loads(json.dumps(record))
    if batch == 1:
        if topic == "device_events":
            record["_data"]["event"]["revision"] = 1
        elif topic == "device_state":
            record["deleted"] = False
        return record
    if topic == "device_events":
        data = record["_data"]
        if data["event"].get("revision") == 2:
            data["event"]["revision"] = 2.0
        moment = _moment(data["log_ts"])
        in_ms = int(data["event"]["id"][-1]) % 2 == 0
        data["log_ts"] = int(moment.timestamp()) * 1000 if in_ms else _slashed(moment)
    elif topic == "app_attributes":
        record["log_ts"] = _slashed(_moment(record["log_ts"]))
    elif topic == "device_state":
        if record.get("deleted") is True:
            record["deleted"] = 1
        record["updated_at"] = _slashed(_moment(record["updated_at"]))
    return record


def _revision(record: dict) -> object:
    """A device event's revision as sent (None for other records, or when not sent)."""
    return record.get("_data", {}).get("event", {}).get("revision")


def _slashed(moment: datetime) -> str:
    """A time as some feeds write it (schema/event_time.py's COMMON_FORMATS read it)."""
    return moment.strftime("%Y/%m/%d %H:%M:%S")


def _moment(value: str | int) -> datetime:
    """The UTC time of a sample time: ISO text as `_iso` writes it, or respelled (epoch
    milliseconds, `_slashed` text).

    Example:
        >>> _moment("2026-11-01T00:00:01Z") == _moment(1793491201000)
        True
        >>> _moment("2026/11/01 00:00:01").isoformat()
        '2026-11-01T00:00:01+00:00'
    """
    if isinstance(value, int):
        return datetime.fromtimestamp(value / 1000, UTC)
    layout = "%Y/%m/%d %H:%M:%S" if "/" in value else "%Y-%m-%dT%H:%M:%SZ"
    return datetime.strptime(value, layout).replace(tzinfo=UTC)


def topic_records(
    topic: str, config: GeneratorConfig, devices: list[Device]
) -> Iterator[tuple[date, dict]]:
    """(day, record) pairs for one topic and batch, deterministic for the seed; some
    respelled (another JSON type, the same value)."""
    rng = random.Random(f"{config.seed}-{config.batch}-{topic}-respelled")
    for day, record in drawn_records(topic, config, devices):
        share = RESPELLED_SHARE
        if config.batch == 1:
            share = EXPLICIT_SHARE
        elif record.get("deleted") is True or _revision(record) == 2:
            share = RESPELLED_FEW_SHARE
        yield day, respelled(topic, record, config.batch) if rng.random() < share else record


def drawn_records(
    topic: str, config: GeneratorConfig, devices: list[Device]
) -> Iterator[tuple[date, dict]]:
    """(day, record) pairs for one topic and batch as drawn, before respelling."""
    rng = random.Random(f"{config.seed}-{config.batch}-{topic}")
    days = batch_days(config.batch)
    if topic == "device_events":
        for seq in range(config.events):
            day = rng.choice(days)
            yield (
                day,
                device_event(rng, rng.choice(devices), _timestamp(rng, day), config.batch, seq),
            )
        yield from resent_events(config, devices)
    elif topic == "app_attributes":
        for _ in range(max(1, config.events // 4)):
            day = rng.choice(days)
            for record in app_attribute_records(
                rng, rng.choice(devices), _timestamp(rng, day), config.batch
            ):
                yield day, record
        yield from split_attributes(config, devices)
    elif topic == "device_state":
        for _ in range(max(1, config.events // 4)):
            device = rng.choice(devices[: max(1, len(devices) // 2)])  # few devices, many updates
            day = rng.choice(days)
            moment = _timestamp(rng, day)
            yield day, device_state_record(rng, device, moment, config.batch)
            if rng.random() < 0.1:  # an older update that arrives after this one
                yield (
                    day,
                    device_state_record(
                        rng, device, moment - timedelta(hours=rng.randint(1, 30)), config.batch
                    ),
                )
        yield from resent_states(config, devices)
    else:
        raise ValueError(f"Unknown topic {topic!r}; known topics: {', '.join(TOPICS)}.")


def write_topic(topic: str, config: GeneratorConfig, devices: list[Device]) -> dict[str, int]:
    """Write one topic's batch as JSON-lines files per day; return line counts."""
    rng = random.Random(f"{config.seed}-{config.batch}-{topic}-malformed")
    by_day: dict[date, list[bytes]] = {}
    counts = {"lines": 0, "malformed": 0, "files": 0}
    for day, record in topic_records(topic, config, devices):
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()
        if rng.random() < MALFORMED_RATE:
            line, _ = malformed_line(rng, line)
            counts["malformed"] += 1
        by_day.setdefault(day, []).append(line)
        counts["lines"] += 1
        if counts["lines"] % 100_000 == 0:
            print(f"  {topic}: {counts['lines']:,} lines generated", file=sys.stderr)
    for day, lines in sorted(by_day.items()):
        folder = config.out_dir / topic / f"dt={day.isoformat()}"
        folder.mkdir(parents=True, exist_ok=True)
        for part, start in enumerate(range(0, len(lines), config.file_events)):
            name = f"part-b{config.batch:03d}-{part:04d}.json" + (".gz" if config.gzip else "")
            payload = b"\n".join(lines[start : start + config.file_events]) + b"\n"
            opener = gzip.open if config.gzip else open
            with opener(folder / name, "wb") as handle:
                handle.write(payload)
            counts["files"] += 1
            print(
                f"  wrote {folder / name} ({min(config.file_events, len(lines) - start)} lines)",
                file=sys.stderr,
            )
    return counts


def generate(config: GeneratorConfig, reference: Reference) -> dict[str, dict[str, int]]:
    """Write every topic for one batch; return per-topic counts of lines, malformed lines, files."""
    devices = fleet(reference, config.seed, size=max(10, config.events // 20))
    return {topic: write_topic(topic, config, devices) for topic in TOPICS}
