"""What a raw model is told (topic, inbox, table, limits): dbt_project.yml and the model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynamic_ddl.ingest.bookkeeping import BookkeepingTables
from dynamic_ddl.ingest.compaction import CompactionPolicy
from dynamic_ddl.ingest.ledger import BatchLimits
from dynamic_ddl.ingest.parse import LineLimits
from dynamic_ddl.ingest.topics import (
    TopicConfig,
    check_raw_table_name,
    schema_modes,
    time_formats,
    topic_flag,
    type_hints,
)
from dynamic_ddl.locks import LockSettings
from dynamic_ddl.schema.naming import JsonPath
from dynamic_ddl.spark_conf import project_root


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
        topic = TopicConfig(
            name=config["topic"],
            record_key=tuple(config["record_key"]),
            event_time=config["event_time"],
            pinned_paths=tuple(config.get("pinned_paths") or ()),
            event_time_format=config.get("event_time_format"),
            keep_raw_json=topic_flag(config, "keep_raw_json", where),
            schema_modes=schema_modes(config.get("schema_mode"), where),
            hints=type_hints(config.get("hints"), where),
            time_formats=time_formats(config.get("time_formats"), where),
        )
        limits = LineLimits(
            max_line_bytes=int(config.get("max_line_bytes", LineLimits.max_line_bytes)),
            max_depth=int(config.get("max_depth", LineLimits.max_depth)),
        )
        return cls(
            topic=topic,
            inbox=inbox if inbox.is_absolute() else project_root() / inbox,
            table=f"{config['schema']}.{config['table']}",
            bookkeeping=BookkeepingTables.in_schema(config["schema"]),
            limits=limits,
            max_columns=int(config.get("max_columns", 500)),
            batch_limits=BatchLimits(
                max_files=int(config.get("max_batch_files", BatchLimits.max_files)),
                max_bytes=int(config.get("max_batch_mb", BatchLimits.max_bytes >> 20)) << 20,
            ),
            lock=LockSettings.from_env(config.get("lock_wait_seconds")),
            compaction=CompactionPolicy.from_config(config, f"model {config['table']}"),
        )


def dotted(path: str) -> JsonPath:
    """A configured JSON path (`_data.log_ts`) as keys."""
    return tuple(path.split("."))
