"""What a raw model is told (topic, inbox, table, limits): dbt_project.yml and the model."""

from __future__ import annotations

import difflib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynamic_ddl.ingest.bookkeeping import BookkeepingTables
from dynamic_ddl.ingest.compaction import CompactionPolicy
from dynamic_ddl.ingest.ledger import READ_LINE_LIMIT, BatchLimits
from dynamic_ddl.ingest.parse import MAX_DEPTH, LineLimits
from dynamic_ddl.ingest.topics import (
    LIMIT_SETTINGS,
    TOPIC_SETTINGS,
    ConfigError,
    TopicConfig,
    check_raw_table_name,
    refuse_unknown_settings,
    schema_modes,
    time_formats,
    topic_flag,
    type_hints,
    whole_number,
)
from dynamic_ddl.locks import LockSettings
from dynamic_ddl.schema.naming import JsonPath
from dynamic_ddl.spark_conf import project_root

# What the raw_ingest materialization tells a raw model besides vars.raw_limits.
MODEL_SETTINGS = {
    *TOPIC_SETTINGS,
    "topic",
    "topic_settings",
    "overridden",
    "inbox_dir",
    "schema",
    "table",
    "lock_wait_seconds",
    "compact_every",
    "compact_after_days",
    "compact_target_mb",
}


LIMITS_WHERE = "vars.raw_limits in dbt_project.yml"


@dataclass(frozen=True)
class RawLimits:
    """`vars.raw_limits`, each within its bounds: checked by every raw model's run and by
    `make topics`/`make lint` (raw_models.sync) alike."""

    lines: LineLimits
    max_columns: int
    batches: BatchLimits

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> RawLimits:
        """The limits `config` sets (the rest their defaults); a value out of bounds is
        an error naming the setting and its bounds.

        Example:
            >>> RawLimits.from_config({"max_line_bytes": 2**30})  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            dynamic_ddl.ingest.topics.ConfigError: ... max_line_bytes must be ... to 16777216, ...
        """
        where = LIMITS_WHERE
        return cls(
            lines=LineLimits(
                # A longer line would be held whole by Spark (see ledger.READ_LINE_LIMIT).
                max_line_bytes=whole_number(
                    config, "max_line_bytes", where, 1, LineLimits.max_line_bytes, READ_LINE_LIMIT
                ),
                max_depth=whole_number(
                    config, "max_depth", where, 1, LineLimits.max_depth, MAX_DEPTH
                ),
            ),
            max_columns=whole_number(config, "max_columns", where, 1, 500),
            batches=BatchLimits(
                max_files=whole_number(config, "max_batch_files", where, 1, BatchLimits.max_files),
                max_bytes=whole_number(
                    config, "max_batch_mb", where, 1, BatchLimits.max_bytes >> 20
                )
                << 20,
            ),
        )


@dataclass(frozen=True)
class IngestSettings:
    """Everything one raw model needs to know, from dbt_project.yml and the model."""

    topic: TopicConfig
    inbox: Path
    table: str
    bookkeeping: BookkeepingTables
    limits: LineLimits = LineLimits()
    max_columns: int = 500
    batch_limits: BatchLimits = BatchLimits()
    lock: LockSettings = LockSettings()
    compaction: CompactionPolicy = CompactionPolicy()

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> IngestSettings:
        """Settings from the dict the `raw_ingest` materialization passes to the model."""
        inbox = Path(config["inbox_dir"])
        where = f"vars.raw_topics.{config['topic']} in dbt_project.yml"
        if config.get("overridden"):
            keys = ", ".join(config["overridden"])
            where += f" (or {keys} in the meta of model {config['table']}, which wins)"
        check_raw_table_name(config["table"], where)
        # The same checks as parse_topics' (make topics, make run), for a dbt run alone.
        refuse_unknown_settings(config.get("topic_settings", ()), TOPIC_SETTINGS, where)
        refuse_unknown_settings(set(config) - MODEL_SETTINGS, LIMIT_SETTINGS, LIMITS_WHERE)
        topic = TopicConfig(
            name=config["topic"],
            record_key=_paths(config.get("record_key")),
            event_time=config.get("event_time"),
            pinned_paths=_paths(config.get("pinned_paths")),
            event_time_format=config.get("event_time_format"),
            keep_raw_json=topic_flag(config, "keep_raw_json", where),
            schema_modes=schema_modes(config.get("schema_mode"), where),
            hints=type_hints(config.get("hints"), where),
            time_formats=time_formats(config.get("time_formats"), where),
        )
        if not topic.record_key or not topic.event_time:
            raise ConfigError(f"{where}: record_key and event_time must name JSON paths.")
        limits = RawLimits.from_config(config)
        return cls(
            topic=topic,
            inbox=inbox if inbox.is_absolute() else project_root() / inbox,
            table=f"{config['schema']}.{config['table']}",
            bookkeeping=BookkeepingTables.in_schema(config["schema"]),
            limits=limits.lines,
            max_columns=limits.max_columns,
            batch_limits=limits.batches,
            lock=LockSettings.from_env(config.get("lock_wait_seconds")),
            compaction=CompactionPolicy.from_config(config, f"model {config['table']}"),
        )


def _paths(value: Any) -> tuple[str, ...]:
    """Configured JSON paths: one (`_data.x`) or a list; not each letter of one.

    Example:
        >>> _paths("_data.x"), _paths(["a", "b.c"]), _paths(None)
        (('_data.x',), ('a', 'b.c'), ())
    """
    if not value:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def dotted(path: str) -> JsonPath:
    """A configured JSON path (`_data.log_ts`) as keys."""
    return tuple(path.split("."))


def unmatched_key_paths(topic: TopicConfig, paths: Collection[JsonPath]) -> list[str]:
    """The topic's event_time and record_key paths that are none of `paths` (a batch's),
    each said with what it leaves NULL and the closest path the batch has: a misspelt
    path otherwise leaves every row's `_event_date` NULL without a word.

    Example:
        >>> topic = TopicConfig("t", ("id",), "_data.log_ts")
        >>> unmatched_key_paths(topic, {("id",), ("_data", "logts")})
        ['event_time `_data.log_ts` (every _event_date is NULL; did you mean `_data.logts`?)']
    """
    present = [".".join(path) for path in paths]
    named = [("event_time", topic.event_time, "every _event_date is NULL")] + [
        ("record_key", path, "child rows' _parent_ keys are NULL") for path in topic.record_key
    ]
    unmatched = []
    for setting, path, effect in named:
        if dotted(path) in paths:
            continue
        close = difflib.get_close_matches(path, present, n=1)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        unmatched.append(f"{setting} `{path}` ({effect}{hint})")
    return unmatched
