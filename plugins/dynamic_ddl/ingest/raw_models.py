"""The raw models of the topics: one thin file per entry of `vars.raw_topics`, generated.

dbt needs a file per model, and every raw model runs the same code (its
settings come from `vars.raw_topics`, passed in by the `raw_ingest`
materialization). So the config is the one source of truth: `sync` writes
`python_models/raw/raw_<topic>.py` for each configured topic (a configured
topic's file is always what the config generates: an edit there is written
over), and removes a generated file whose topic left the config. A
`raw_*.py` that is not exactly a generated file (never generated, or edited
since) and whose topic is not configured is never removed, only reported.
`python -m dynamic_ddl.ingest topics` runs it; `--check` only says what
would change (lint runs that).

Each file carries its topic's entry as the model's `meta.raw_topic` (record
key, event time, `schema_mode`, `hints`, `time_formats`), which the docs site
shows on the model's page; the run itself reads the entry from `vars`, so a
stale file misleads only the docs, and lint names it. A model overrides its
topic's OVERRIDABLE settings by the same keys in its own `meta` (in a
properties file or dbt_project.yml's `models:`): they are kept out of the
file's `meta`, which would win over both.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dynamic_ddl.ingest.settings import RawLimits
from dynamic_ddl.ingest.topics import load_project_vars, parse_topics

RAW_MODELS_DIR = Path("python_models") / "raw"
MODEL_PREFIX = "raw_"
GENERATED_MARK = "Generated from vars.raw_topics by `python -m dynamic_ddl.ingest topics`"
# What a model's `meta` shows of its topic's entry, with the defaults an entry may omit.
META_DEFAULTS = {
    "record_key": None,
    "event_time": None,
    "schema_mode": "evolve",
    "hints": {},
    "time_formats": [],
}
# The meta key of the topic's entry in a generated model.
TOPIC_META_KEY = "raw_topic"
# Schema control a model's own `meta` may set, over its topic's entry (the
# raw_ingest materialization applies them).
OVERRIDABLE = ("schema_mode", "hints", "time_formats")

TEMPLATE = '''"""The raw model of the topic in its name (raw_<topic>): see dynamic_ddl.ingest.job.

{mark}
(`make topics`): edit the topic's entry in dbt_project.yml, not this file.
"""

from dynamic_ddl.ingest.job import ingest_topic


def model(dbt, session):
    # In the model itself: dbt sets Python models to "table" over dbt_project.yml.
    # meta.raw_topic is the topic's entry, for the docs site (the run reads
    # vars.raw_topics; schema_mode, hints, time_formats in the model's meta win).
    dbt.config(materialized="raw_ingest", meta={meta})
    # Ingestion reads these tables (fresh, by name); declared so lineage shows it.
    dbt.source("ingestion", "raw_file_ledger")
    dbt.source("ingestion", "raw_file_ledger_archive")
    dbt.source("ingestion", "raw_schema_registry")
    return ingest_topic(session, dbt.config.get("raw_ingest"))
'''


def topic_meta(entry: dict[str, Any]) -> dict[str, Any]:
    """What a raw model's `meta` shows of its topic's entry (as configured, defaults filled
    in for settings absent or left empty).

    Example:
        >>> topic_meta({"record_key": "id", "event_time": "ts", "hints": None})["hints"]
        {}
    """
    values = {key: entry.get(key) for key in META_DEFAULTS}
    return {
        key: default if values[key] is None else values[key]
        for key, default in META_DEFAULTS.items()
    }


def model_source(entry: dict[str, Any]) -> str:
    """The raw model file of a topic, from its entry in vars.raw_topics (the meta is a
    Python literal, as dbt reads `dbt.config`'s arguments)."""
    return TEMPLATE.format(mark=GENERATED_MARK, meta=repr({TOPIC_META_KEY: topic_meta(entry)}))


def is_generated(text: str) -> bool:
    """Whether a model file's text is exactly what `model_source` writes for some entry
    (so removing it loses no edit).

    Example:
        >>> is_generated(model_source({"record_key": "id", "event_time": "ts"}))
        True
    """
    found = re.search(r"meta=(\{.*\})\)\n", text)
    if not found or GENERATED_MARK not in text:
        return False
    try:
        meta = ast.literal_eval(found.group(1))
    except (ValueError, SyntaxError):
        return False
    entry = meta.get(TOPIC_META_KEY) if isinstance(meta, dict) else None
    return isinstance(entry, dict) and text == model_source(entry)


@dataclass(frozen=True)
class SyncReport:
    """What `sync` did (or, with `check`, would do) to the raw model files."""

    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    kept_edited: list[Path] = field(default_factory=list)  # no topic, edited: left alone

    @property
    def in_sync(self) -> bool:
        """Nothing to write or remove (a hand-made file is the user's, not out of date)."""
        return not (self.written or self.removed)

    def lines(self, checked: bool = False) -> list[str]:
        """The report as a person reads it, one line per file (`checked`: nothing was done)."""
        write, remove = ("would write", "would remove") if checked else ("wrote", "removed")
        return (
            [f"{write} {path}" for path in self.written]
            + [f"{remove} {path} (its topic left vars.raw_topics)" for path in self.removed]
            + [
                f"left {path}: no topic of that name in vars.raw_topics, and not"
                " generated; if it was a topic's, add the topic back or delete the file"
                for path in self.kept_edited
            ]
        )


def model_file(project_dir: Path, topic: str) -> Path:
    """Where the raw model of `topic` lives."""
    return Path(project_dir) / RAW_MODELS_DIR / f"{MODEL_PREFIX}{topic}.py"


def sync(project_dir: Path, check: bool = False) -> SyncReport:
    """Make `python_models/raw/` hold exactly the configured topics' raw models.

    With `check`, nothing is written: the report says what is out of date.
    Raises topics.ConfigError when `vars.raw_topics` is invalid.
    """
    project_vars = load_project_vars(project_dir)
    topics = parse_topics(project_vars)
    # Checked here too, or `make lint` passed what every raw model's run refuses.
    RawLimits.from_config(project_vars.get("raw_limits") or {})
    report = SyncReport()
    wanted = {model_file(project_dir, name): name for name in topics}
    for path, name in sorted(wanted.items()):
        source = model_source(project_vars["raw_topics"][name])
        if not path.exists() or path.read_text(encoding="utf-8") != source:
            report.written.append(path)
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(source, encoding="utf-8")
    folder = Path(project_dir) / RAW_MODELS_DIR
    for path in sorted(folder.glob(f"{MODEL_PREFIX}*.py")):
        if path in wanted:
            continue
        if is_generated(path.read_text(encoding="utf-8")):
            report.removed.append(path)
            if not check:
                path.unlink()
        else:
            report.kept_edited.append(path)
    return report
