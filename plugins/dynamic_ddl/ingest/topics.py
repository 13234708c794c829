"""Topics and the inbox, as configured in dbt_project.yml `vars`.

    vars:
      inbox_dir: data/inbox          # relative to the project folder
      raw_topics:
        device_events:
          record_key: [_data.event.id]   # JSON path(s) identifying a record
          event_time: _data.log_ts       # JSON path of the event timestamp
          pinned_paths: [_data.device.model]  # optional: columns first when the cap must choose
          event_time_format: dd.MM.yyyy HH:mm  # optional: tried before ISO 8601, epochs, ...
          keep_raw_json: false           # optional: a copy of each line in _raw_json
          schema_mode: evolve            # optional: or freeze, rescue, discard_row,
                                         # discard_value; per path prefix too
                                         # (schema/modes.py)
          hints: {_data.n: double}       # optional: a path's column type, fixed
          time_formats: [dd/MM/yyyy HH:mm]  # optional: text in these (or ISO 8601)
                                         # at any path is a time (typed times)

A raw model's `meta` may override `schema_mode`, `hints` and `time_formats`
for that model (raw_models.py, OVERRIDABLE).

Adding a topic is a config entry here plus a folder `<inbox_dir>/<topic>/`;
its raw model is generated from this entry (raw_models.py, `make topics`).
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dynamic_ddl.schema.exact import HINT_TYPES
from dynamic_ddl.schema.modes import SchemaModes

# The usual names of JSON-lines files, plain or gzipped.
JSON_SUFFIXES = (".json", ".jsonl", ".ndjson", ".json.gz", ".jsonl.gz", ".ndjson.gz")
# A JSON-lines file's rotated or compressed copy (`app.json.1`, `app.json-20261127`,
# `app.json.2.gz`, `app.json.bz2`): not read, so named in a warning (found by review:
# a copytruncate's copy holds lines the truncated file no longer has).
_CODECS = "gz|gzip|bz2|zst|xz|lz4|snappy|deflate|zip|z|br"
_ROTATED_JSON = re.compile(rf"\.(json|jsonl|ndjson)(\.gz)?([.-][0-9][0-9-]*)?(\.({_CODECS}))?$")
ROTATED_COPY = (
    "it looks like a rotated or compressed copy of a JSON-lines file (only"
    f" {', '.join(JSON_SUFFIXES)} are read): lines that are only in it are in no table."
    " If they are wanted, move it out of the inbox and put its missing lines in a new file"
)
_TOPIC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
# What a topic of vars.raw_topics and vars.raw_limits may set; any other key is a typo
# (found by review: `schema_modes: freeze` was ignored, and the topic evolved).
TOPIC_SETTINGS = (
    "record_key",
    "event_time",
    "event_time_format",
    "time_formats",
    "pinned_paths",
    "hints",
    "schema_mode",
    "keep_raw_json",
)
LIMIT_SETTINGS = ("max_line_bytes", "max_depth", "max_columns", "max_batch_files", "max_batch_mb")
# The bookkeeping tables of a schema (bookkeeping.BookkeepingTables), named as raw
# tables are: no topic's raw table (`raw_<topic>`) may take one of these names.
BOOKKEEPING_NAMES = {
    "ledger": "raw_file_ledger",
    "ledger_archive": "raw_file_ledger_archive",
    "registry": "raw_schema_registry",
    "quarantine": "raw_quarantine",
    "quarantined_values": "raw_quarantined_values",
}


class ConfigError(ValueError):
    """dbt_project.yml is missing something or has it in the wrong shape; says what to change."""


class InboxError(RuntimeError):
    """A topic's inbox folder is missing or holds no JSON files; says how to fill it."""


@dataclass(frozen=True)
class TopicConfig:
    """One topic: where its files are and how its records are identified."""

    name: str
    record_key: tuple[str, ...]
    event_time: str
    # Paths that take a column before any other when the column cap must choose.
    pinned_paths: tuple[str, ...] = ()
    # A Spark datetime pattern tried first (schema/event_time.py tries the usual ones).
    event_time_format: str | None = None
    # The inbox is the raw archive (rows point at it by _source_file and
    # _line_number); a copy of each line in the raw table only on request.
    keep_raw_json: bool = False
    # How its schema may change, per path prefix (schema/modes.py).
    schema_modes: SchemaModes = SchemaModes()
    # Declared column types: (path as the registry writes it, type). A hinted path's
    # column takes that type when it is made; values it cannot hold go to `__text` (or
    # where the path's mode sends them). The event time is a timestamp unless hinted.
    hints: tuple[tuple[str, str], ...] = ()
    # Spark datetime patterns: text in one of them (or in ISO 8601) at any path is a
    # time, so a new path whose every value is one gets a timestamp column.
    time_formats: tuple[str, ...] = ()

    @property
    def event_time_formats(self) -> tuple[str, ...]:
        """The formats declared for the event time: its own first, then the topic's."""
        first = (self.event_time_format,) if self.event_time_format else ()
        return first + self.time_formats


def load_project_vars(project_dir: Path) -> dict[str, Any]:
    """The `vars` mapping of <project_dir>/dbt_project.yml."""
    path = Path(project_dir) / "dbt_project.yml"
    try:
        project = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path} not found; pass the dbt project folder.") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from None
    project_vars = project.get("vars") or {}
    if not isinstance(project_vars, dict):
        raise ConfigError(f"`vars` in {path} must be a mapping of names to values.")
    return project_vars


def check_raw_table_name(table: str, where: str) -> None:
    """Refuse a raw table name that is another table's: one holding `__` (which parts a
    child table's name, or a lock's, from its raw table's: `raw_feed__lock`), or a
    bookkeeping table's (`raw_quarantine`)."""
    if "__" in table:
        raise ConfigError(
            f"{where}: {table} holds __, which parts a child table's or a lock's name from"
            " its raw table's; rename the topic (or the model) without __."
        )
    if table in BOOKKEEPING_NAMES.values():
        raise ConfigError(
            f"{where}: {table} is the name of a bookkeeping table of the schema; rename the"
            " topic (or the model)."
        )


def parse_topics(project_vars: dict[str, Any]) -> dict[str, TopicConfig]:
    """Validate `vars.raw_topics` and return it as TopicConfig objects.

    Example:
        >>> topics = parse_topics({"raw_topics": {"t": {"record_key": ["id"], "event_time": "ts"}}})
        >>> topics["t"].record_key, topics["t"].event_time, topics["t"].keep_raw_json
        (('id',), 'ts', False)
    """
    raw_topics = project_vars.get("raw_topics")
    if not isinstance(raw_topics, dict) or not raw_topics:
        raise ConfigError(
            "vars.raw_topics in dbt_project.yml must map each topic name to "
            "{record_key: [json.path, ...], event_time: json.path}."
        )
    limits = project_vars.get("raw_limits") or {}
    if not isinstance(limits, dict):
        raise ConfigError("vars.raw_limits in dbt_project.yml must map limits to numbers.")
    refuse_unknown_settings(limits, LIMIT_SETTINGS, "vars.raw_limits in dbt_project.yml")
    topics = {}
    for name, entry in raw_topics.items():
        where = f"vars.raw_topics.{name} in dbt_project.yml"
        if not isinstance(name, str) or not _TOPIC_NAME.match(name):
            raise ConfigError(
                f"{where}: a topic name becomes part of table names (raw_<topic>); "
                "use lowercase letters, digits and _ only, starting with a letter."
            )
        check_raw_table_name(f"raw_{name}", where)
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a mapping with record_key and event_time.")
        refuse_unknown_settings(entry, TOPIC_SETTINGS, where)
        record_key = entry.get("record_key")
        if isinstance(record_key, str):
            record_key = [record_key]
        if not record_key or not all(isinstance(path, str) and path for path in record_key):
            raise ConfigError(f"{where}: record_key must be a JSON path or a list of them.")
        event_time = entry.get("event_time")
        if not isinstance(event_time, str) or not event_time:
            raise ConfigError(f"{where}: event_time must be the JSON path of the event timestamp.")
        pinned = entry.get("pinned_paths") or []
        if not isinstance(pinned, list) or not all(isinstance(p, str) and p for p in pinned):
            raise ConfigError(f"{where}: pinned_paths must be a list of JSON paths.")
        event_time_format = entry.get("event_time_format")
        if event_time_format is not None and not isinstance(event_time_format, str):
            raise ConfigError(
                f"{where}: event_time_format must be a Spark datetime pattern, "
                "e.g. 'dd.MM.yyyy HH:mm'."
            )
        topics[name] = TopicConfig(
            name=name,
            record_key=tuple(record_key),
            event_time=event_time,
            pinned_paths=tuple(pinned),
            event_time_format=event_time_format,
            keep_raw_json=topic_flag(entry, "keep_raw_json", where),
            schema_modes=schema_modes(entry.get("schema_mode"), where),
            hints=type_hints(entry.get("hints"), where),
            time_formats=time_formats(entry.get("time_formats"), where),
        )
    return topics


def time_formats(value: Any, where: str) -> tuple[str, ...]:
    """A topic's `time_formats`: a list of Spark datetime patterns (one alone is a list).

    Example:
        >>> time_formats("dd/MM/yyyy HH:mm", "t"), time_formats(None, "t")
        (('dd/MM/yyyy HH:mm',), ())
    """
    if value is None:
        return ()
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
        raise ConfigError(
            f"{where}: time_formats must be a list of Spark datetime patterns, "
            "e.g. ['dd/MM/yyyy HH:mm:ss', 'yyyyMMddHHmmss']."
        )
    return tuple(patterns)


def type_hints(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    """A topic's `hints` (JSON path -> type), checked: each type one of HINT_TYPES.

    Example:
        >>> type_hints({"_data.log_ts": "TIMESTAMP"}, "t")
        (('_data.log_ts', 'timestamp'),)
    """
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: hints must map JSON paths to types, e.g. {{_data.n: double}}.")
    hints = []
    for path, data_type in value.items():
        name = str(data_type).lower()
        if not isinstance(path, str) or not path or name not in HINT_TYPES:
            raise ConfigError(
                f"{where}: hints.{path} must be one of {', '.join(HINT_TYPES)}, not {data_type!r}."
            )
        hints.append((path, name))
    return tuple(hints)


def schema_modes(value: Any, where: str) -> SchemaModes:
    """A topic's `schema_mode` setting; a wrong one is a ConfigError naming the setting."""
    try:
        return SchemaModes.from_config(value, where)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def refuse_unknown_settings(keys: Iterable[Any], known: Sequence[str], where: str) -> None:
    """A ConfigError naming a key that is no setting, and the setting it may mean.

    Example:
        >>> refuse_unknown_settings(["hint"], TOPIC_SETTINGS, "t")
        Traceback (most recent call last):
        ...
        dynamic_ddl.ingest.topics.ConfigError: t: hint is no setting (did you mean hints?).
    """
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            meant = (
                f" (did you mean {close[0]}?)" if close else f"; the settings: {', '.join(known)}"
            )
            raise ConfigError(f"{where}: {key} is no setting{meant}.")


def whole_number(
    config: dict[str, Any],
    name: str,
    where: str,
    minimum: int,
    default: int | None,
    maximum: int | None = None,
) -> int | None:
    """A whole-number setting within its bounds (`default` when absent); anything else
    is an error naming it and them.

    Example:
        >>> whole_number({"n": 0}, "n", "vars.x", 1, 32, 64)
        Traceback (most recent call last):
        ...
        dynamic_ddl.ingest.topics.ConfigError: vars.x: n must be a whole number from 1 to 64, not 0.
    """
    value = config.get(name)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bounds = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
        raise ConfigError(f"{where}: {name} must be a whole number {bounds}, not {value!r}.")
    return value


def topic_flag(entry: dict[str, Any], name: str, where: str) -> bool:
    """A true/false setting of a topic (false when absent); anything else is an error.

    Example:
        >>> topic_flag({"keep_raw_json": True}, "keep_raw_json", "vars.raw_topics.t")
        True
    """
    value = entry.get(name, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {name} must be true or false, not {value!r}.")
    return value


def inbox_path(project_dir: Path, project_vars: dict[str, Any]) -> Path:
    """vars.inbox_dir as an absolute path (relative paths are taken from the project folder)."""
    inbox = Path(str(project_vars.get("inbox_dir", "data/inbox")))
    return inbox if inbox.is_absolute() else (Path(project_dir) / inbox).resolve()


def is_hidden(relative: Path) -> bool:
    """Whether a path under a topic folder is hidden: a part starting with `.` or `_`.

    Spark and Hadoop skip such files (`_SUCCESS`, `.part.crc`, uploads in
    progress); the inbox does the same, so a file is either read whole or
    not taken at all.
    """
    return any(part.startswith((".", "_")) for part in relative.parts)


def readable_name(path: Path) -> bool:
    r"""Whether a path is text Spark can open: a name that is not UTF-8 comes from the
    file system as surrogate escapes, which neither the JVM nor a table can hold.

    Example:
        >>> readable_name(Path("dt=2026-11-01/caf\u00e9.json"))
        True
        >>> readable_name(Path(b"caf\xe9.json".decode(errors="surrogateescape")))
        False
    """
    try:
        str(path).encode()
    except UnicodeEncodeError:
        return False
    return True


def topic_files(inbox: Path, topic: str) -> list[Path]:
    """The JSON-lines files of a topic, sorted; raises InboxError when there are none.

    Any name a filesystem allows is taken (brackets, spaces, `%`, unicode, ...),
    except hidden ones (see is_hidden). Linked folders are followed; a file
    reached by two paths (a link to another inbox file) is taken once, under its
    first path. What is left out though it looks meant to be read is named in a
    warning at every run (found by review: each was skipped without a word): a
    name not UTF-8, a JSON suffix in other letters (`.JSON`, `.json.GZ`: Hadoop
    picks gzip by the lower-case suffix), a link to nothing, a folder that
    cannot be listed.
    """
    folder = inbox / topic
    fix = (
        "Run `make data` to generate sample data (into an inbox holding no file), "
        "put JSON-lines files "
        f"({', '.join(JSON_SUFFIXES)}) under {folder}/dt=YYYY-MM-DD/, "
        "or point vars.inbox_dir in dbt_project.yml at your inbox."
    )
    if not folder.is_dir():
        raise InboxError(f"Inbox folder {folder} for topic '{topic}' does not exist. {fix}")
    found, left_out = _listed_files(folder)
    files, by_target = [], {}
    # The file's own path first: a link made later never takes over a file committed.
    # Own as seen from the topic's folder, which may itself be reached by a link (found
    # by review: under a linked inbox every path looked like a link).
    real_folder = folder.resolve()
    for path in sorted(found, key=lambda path: (not _own_path(folder, real_folder, path), path)):
        if not readable_name(path):  # found by review: it stopped the topic's every run
            left_out.append(
                (
                    path,
                    "its name is not UTF-8, which Spark cannot open. Rename it"
                    " (e.g. `convmv -f latin1 -t utf8`)",
                )
            )
            continue
        # The file itself, whatever names it: a symbolic or a hard link (found by
        # review: a hard link was another file, its lines ingested twice).
        try:
            stat = path.stat()
        except OSError:
            continue  # gone since it was listed
        target = (stat.st_dev, stat.st_ino)
        if target in by_target:
            left_out.append(
                (path, f"it is the file {by_target[target]} again (a link), taken once")
            )
            continue
        by_target[target] = path
        files.append(path)
    for path, why in left_out:
        logging.getLogger("dynamic_ddl.ingest").warning(
            f"{ascii(str(path))} is left in the inbox, not read: {why}."
        )
    if not files:
        raise InboxError(f"Inbox folder {folder} for topic '{topic}' holds no JSON files. {fix}")
    return sorted(files)


def _own_path(folder: Path, real_folder: Path, path: Path) -> bool:
    """Whether `path`, under `folder` (whose resolved path is `real_folder`, resolved once
    for all its files), is reached without a link below `folder`.

    Example:
        >>> import tempfile
        >>> inbox = Path(tempfile.mkdtemp())
        >>> (inbox / "dt=1").mkdir(); (inbox / "current").symlink_to("dt=1")
        >>> real = inbox.resolve()
        >>> _own_path(inbox, real, inbox / "dt=1"), _own_path(inbox, real, inbox / "current")
        (True, False)
    """
    return path.resolve() == real_folder / path.relative_to(folder)


def _listed_files(folder: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The JSON-lines files under `folder`, sorted (linked folders followed, each folder
    once), and what looks meant to be read but is not: (path, why).

    A folder of the topic's own tree is listed under its own path only: a link to it
    (`current -> dt=2026-11-01`) is not followed (found by review: walked first, the
    link took the folder's files over, new paths ingested again)."""
    found: list[Path] = []
    left_out: list[tuple[Path, str]] = []
    real_folder = folder.resolve()
    own = set()  # the topic's own folders, links not followed, hidden ones left out
    for root, folders, _ in os.walk(folder):
        own.add(Path(root).resolve())
        folders[:] = [f for f in folders if not f.startswith((".", "_"))]
    visited: set[Path] = set()

    def unlisted(error: OSError) -> None:
        left_out.append(
            (Path(error.filename or folder), f"its folder cannot be listed ({error.strerror})")
        )

    for root, folders, names in os.walk(folder, followlinks=True, onerror=unlisted):
        here = Path(root)
        real = here.resolve()
        linked_to_own = real in own and not _own_path(folder, real_folder, here)
        if real in visited or linked_to_own:  # a link back up, or a second link to one folder
            folders[:] = []
            continue
        visited.add(real)
        folders[:] = sorted(f for f in folders if not f.startswith((".", "_")))
        for name in names:
            path = here / name
            if is_hidden(path.relative_to(folder)):
                continue
            if name.endswith(JSON_SUFFIXES):
                if path.is_file():
                    found.append(path)
                elif path.exists():  # a FIFO, a socket, a folder named `x.json`
                    left_out.append((path, "it is not a regular file"))
                else:
                    left_out.append((path, "it is a link to nothing"))
            elif name.lower().endswith(JSON_SUFFIXES):
                suffixes = ", ".join(JSON_SUFFIXES)
                left_out.append((path, f"its suffix is not in lower case ({suffixes}); rename it"))
            elif _ROTATED_JSON.search(name.lower()):
                left_out.append((path, ROTATED_COPY))
    return sorted(found), left_out
