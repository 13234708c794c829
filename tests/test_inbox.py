"""Topic configuration and the inbox check: bad config and empty folders name the fix."""

from __future__ import annotations

import pytest
import yaml

from dynamic_ddl.ingest.__main__ import check, main
from dynamic_ddl.ingest.topics import ConfigError, InboxError, parse_topics, topic_files
from tests.conftest import PROJECT_ROOT

PROJECT_YML = """
name: p
vars:
  inbox_dir: inbox
  raw_topics:
    device_events: {record_key: [_data.event.id], event_time: _data.log_ts}
"""


def test_project_topics_parse():
    from dynamic_ddl.ingest.topics import load_project_vars

    topics = parse_topics(load_project_vars(PROJECT_ROOT))
    assert set(topics) == {"device_events", "app_attributes", "device_state"}
    assert topics["device_events"].record_key == ("_data.event.id",)


@pytest.mark.parametrize(
    ("raw_topics", "message"),
    [
        (None, "vars.raw_topics"),
        ({"t": "oops"}, "must be a mapping"),
        ({"t": {"event_time": "ts"}}, "record_key"),
        ({"t": {"record_key": "id"}}, "event_time"),
        # raw_feed__lock would be feed's lock table; raw_quarantine is the quarantine's.
        ({"feed__lock": {"record_key": "id", "event_time": "ts"}}, "holds __"),
        ({"quarantine": {"record_key": "id", "event_time": "ts"}}, "bookkeeping table"),
        # Found by review: a misspelled setting was ignored (the topic evolved).
        (
            {"t": {"record_key": "id", "event_time": "ts", "schema_modes": "freeze"}},
            r"schema_modes is no setting \(did you mean schema_mode\?\)",
        ),
    ],
)
def test_malformed_topic_config_names_the_setting(raw_topics, message):
    with pytest.raises(ConfigError, match=message):
        parse_topics({"raw_topics": raw_topics})


def test_missing_and_empty_inbox_folders_name_the_fix(tmp_path):
    with pytest.raises(InboxError, match="does not exist.*make data"):
        topic_files(tmp_path, "device_events")
    (tmp_path / "device_events" / "dt=2026-11-01").mkdir(parents=True)
    (tmp_path / "device_events" / "dt=2026-11-01" / "notes.txt").write_text("not json")
    with pytest.raises(InboxError, match="holds no JSON files.*vars.inbox_dir"):
        topic_files(tmp_path, "device_events")


def test_files_left_out_are_named_and_linked_ones_are_taken_once(tmp_path, caplog):
    """Found by review: a `.JSON` or `.json.GZ`, a linked folder and a link to nothing
    were skipped without a word, and a link to another inbox file (`latest.json`) had
    its lines taken twice. Linked folders are followed (a loop once), a file reached
    twice is taken once, and what is left out is named."""
    topic = tmp_path / "inbox" / "device_events"
    day = topic / "dt=2026-11-01"
    day.mkdir(parents=True)
    (day / "a.json").write_text("{}\n")
    (day / "B.JSON").write_text("{}\n")
    (day / "c.json.GZ").write_bytes(b"")
    (day / "app.json.1").write_text("{}\n")  # rotated copies (a later review)
    (day / "app.json-20261127.bz2").write_bytes(b"")
    elsewhere = tmp_path / "mounted" / "fleet_a"
    elsewhere.mkdir(parents=True)
    (elsewhere / "d.json").write_text("{}\n")
    (topic / "dt=2026-11-02").symlink_to(elsewhere, target_is_directory=True)
    (topic / "latest.json").symlink_to(day / "a.json")
    (day / "hard.json").hardlink_to(day / "a.json")  # a hard link too (a later review)
    (topic / "gone.json").symlink_to(tmp_path / "nowhere.json")
    (topic / "loop").symlink_to(topic, target_is_directory=True)

    with caplog.at_level("WARNING", logger="dynamic_ddl.ingest"):
        files = topic_files(tmp_path / "inbox", "device_events")
    assert files == [day / "a.json", topic / "dt=2026-11-02" / "d.json"]
    messages = " ".join(record.getMessage() for record in caplog.records)
    for name, why in (
        ("B.JSON", "not in lower case"),
        ("c.json.GZ", "not in lower case"),
        ("latest.json", "again (a link), taken once"),
        ("hard.json", "again (a link), taken once"),
        ("gone.json", "a link to nothing"),
        ("app.json.1", "rotated or compressed copy"),
        ("app.json-20261127.bz2", "rotated or compressed copy"),
    ):
        assert f"{name}' is left in the inbox, not read:" in messages, name
        assert why in messages, why


def test_a_link_inside_the_topic_never_takes_over_a_files_own_path(tmp_path):
    """Found by review: a link `current -> dt=2026-11-01` (listed first) took the
    folder's files over, and under an inbox reached by a link every path looked like
    a link, so `a_latest.json -> events.json` won: either way a committed file came
    back under a new path, and its lines were ingested again."""
    topic = tmp_path / "disk" / "inbox" / "feed"
    day = topic / "dt=2026-11-01"
    day.mkdir(parents=True)
    (day / "events.json").write_text("{}\n")
    (day / "a_latest.json").symlink_to("events.json")
    (topic / "current").symlink_to("dt=2026-11-01", target_is_directory=True)
    (tmp_path / "data").symlink_to(tmp_path / "disk", target_is_directory=True)
    for inbox in (tmp_path / "disk" / "inbox", tmp_path / "data" / "inbox"):
        assert topic_files(inbox, "feed") == [inbox / "feed" / "dt=2026-11-01" / "events.json"]


def test_check_cli_reports_files_or_fails_with_one_message(tmp_path, capsys):
    (tmp_path / "dbt_project.yml").write_text(PROJECT_YML)
    assert main(["check", "--project-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: Inbox folder") and "Traceback" not in err
    day = tmp_path / "inbox" / "device_events" / "dt=2026-11-01"
    day.mkdir(parents=True)
    (day / "part-0.json").write_text("{}\n")
    (day / "part-1.json.gz").write_bytes(b"")
    assert check(tmp_path) == f"Inbox {tmp_path / 'inbox'}: device_events 2 files"


def test_invalid_yaml_is_a_config_error(tmp_path):
    (tmp_path / "dbt_project.yml").write_text("vars: [unclosed")
    assert main(["check", "--project-dir", str(tmp_path)]) == 2


@pytest.mark.parametrize("table", ["raw_feed__lock", "raw_quarantine"])
def test_a_raw_model_whose_table_is_another_tables_is_refused(table):
    """The raw model's own check, for a model written by hand or by an older generator."""
    from dynamic_ddl.ingest.settings import IngestSettings

    config = {"topic": "feed", "table": table, "schema": "s", "inbox_dir": "/tmp"}
    with pytest.raises(ConfigError, match=table):
        IngestSettings.from_config({**config, "record_key": ["id"], "event_time": "ts"})


VALID = {"topic": "feed", "table": "raw_feed", "schema": "s", "inbox_dir": "/tmp"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        # Found by review: deeper, a line could again end the Spark driver (parse.MAX_DEPTH).
        ({"max_depth": 1000}, "max_depth must be a whole number from 1 to 32, not 1000"),
        ({"max_line_bytes": 0}, "max_line_bytes must be a whole number from 1 to 16777216"),
        # Longer, a line would reach Spark whole (ledger.READ_LINE_LIMIT).
        ({"max_line_bytes": 2**25}, "from 1 to 16777216, not 33554432"),
        ({"max_columns": "1e3"}, "max_columns must be a whole number >= 1, not '1e3'"),
        ({"max_column": 5}, r"max_column is no setting \(did you mean max_columns\?\)"),
        ({"topic_settings": ["record_key", "time_format"]}, "time_format is no setting"),
    ],
)
def test_limits_and_settings_a_dbt_run_passes_are_checked_naming_the_fix(settings, message):
    """A `dbt run` alone (no `make topics`) passes a raw model its topic and vars.raw_limits:
    the same checks, in vars.raw_limits' words."""
    from dynamic_ddl.ingest.settings import IngestSettings

    config = {**VALID, "record_key": ["id"], "event_time": "ts", **settings}
    with pytest.raises(ConfigError, match=message):
        IngestSettings.from_config(config)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_line_bytes": 2**25}, "max_line_bytes must be a whole number from 1 to 16777216"),
        ({"max_depth": 0}, "max_depth must be a whole number from 1 to 32, not 0"),
        ({"max_batch_mb": 1.5}, "max_batch_mb must be a whole number >= 1, not 1.5"),
    ],
)
def test_raw_limits_out_of_bounds_fail_make_topics_as_they_fail_a_run(tmp_path, limits, message):
    """`make topics` and `make lint` (raw_models.sync) check the values of vars.raw_limits
    as every raw model's run does: found by review, they checked only the names."""
    from dynamic_ddl.ingest.raw_models import sync

    topics = {"t": {"record_key": "id", "event_time": "ts"}}
    project = {"name": "p", "vars": {"raw_topics": topics, "raw_limits": limits}}
    (tmp_path / "dbt_project.yml").write_text(yaml.safe_dump(project))
    with pytest.raises(ConfigError, match=rf"vars.raw_limits .*{message}"):
        sync(tmp_path, check=True)


def test_one_pinned_path_is_a_path_and_raw_limits_are_checked_by_make_topics():
    from dynamic_ddl.ingest.settings import IngestSettings

    config = {**VALID, "record_key": "id", "event_time": "ts", "pinned_paths": "_data.x"}
    topic = IngestSettings.from_config(config).topic
    assert (topic.record_key, topic.pinned_paths) == (("id",), ("_data.x",))
    topics = {"t": {"record_key": "id", "event_time": "ts"}}
    with pytest.raises(ConfigError, match=r"vars.raw_limits .*max_dept is no setting"):
        parse_topics({"raw_topics": topics, "raw_limits": {"max_dept": 5}})
