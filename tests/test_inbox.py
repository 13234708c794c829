"""Topic configuration and the inbox check: bad config and empty folders name the fix."""

from __future__ import annotations

import pytest

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
