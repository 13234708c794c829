"""Adding a topic is configuration only: its raw model is generated from vars.raw_topics."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from dynamic_ddl.ingest.__main__ import main
from dynamic_ddl.ingest.raw_models import model_file, model_source, sync
from tests.conftest import DBT, PROJECT_ROOT

NEW_TOPIC = {
    "record_key": ["flight.id"],
    "event_time": "flight.started_at",
    "schema_mode": {"*": "evolve", "flight.telemetry": "rescue"},
    "hints": {"flight.started_at": "timestamp"},
    "time_formats": ["dd/MM/yyyy HH:mm"],
}


def test_the_project_has_one_generated_raw_model_per_topic():
    """The checked-in raw models are exactly what the config generates."""
    report = sync(PROJECT_ROOT, check=True)
    assert report.in_sync, report.lines(checked=True)
    assert not report.kept_edited


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the dbt project (no state, no data) that a test may change."""
    copy = tmp_path / "project"
    copy.mkdir()
    shutil.copy(PROJECT_ROOT / "dbt_project.yml", copy)
    for folder in ("models", "macros", "python_models", "seeds", "tests/data_tests"):
        shutil.copytree(PROJECT_ROOT / folder, copy / folder)
    return copy


def set_topics(project: Path, change) -> None:
    """Rewrite the copy's dbt_project.yml with `change(raw_topics)` applied."""
    path = project / "dbt_project.yml"
    config = yaml.safe_load(path.read_text())
    change(config["vars"]["raw_topics"])
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def dbt(
    project: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DBT_")}, **(env or {})}
    command = [str(DBT), *args, "--project-dir", str(project)]
    command += ["--profiles-dir", str(PROJECT_ROOT / "profiles")]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)


def test_a_topic_added_to_the_config_gets_its_raw_model_in_dbt(project, capsys):
    """A new entry in vars.raw_topics, then `topics`: dbt selects `raw_<topic>`, with the
    raw_ingest materialization, the topic's entry (schema mode and hints included) as
    its `meta.raw_topic` for the docs site, and the ledger and registry upstream in its
    lineage. Schema control set in the model's own meta (a properties file) stays
    beside it, not shadowed by the file's meta (the materialization applies it)."""
    set_topics(project, lambda topics: topics.update(drone_flights=NEW_TOPIC))
    assert main(["topics", "--check", "--project-dir", str(project)]) == 1
    assert "would write" in capsys.readouterr().out
    assert not model_file(project, "drone_flights").exists()

    assert main(["topics", "--project-dir", str(project)]) == 0
    assert model_file(project, "drone_flights").read_text() == model_source(NEW_TOPIC)
    assert main(["topics", "--check", "--project-dir", str(project)]) == 0
    override = {"config": {"meta": {"schema_mode": "rescue", "hints": {"flight.n": "double"}}}}
    properties = {"version": 2, "models": [{"name": "raw_drone_flights", **override}]}
    (project / "python_models" / "raw" / "_drone.yml").write_text(yaml.safe_dump(properties))

    listed = dbt(
        project,
        "ls",
        "--select",
        "raw_drone_flights",
        "--resource-type",
        "model",
        "--output",
        "json",
    )
    assert listed.returncode == 0, listed.stdout[-2000:]
    nodes = [json.loads(line) for line in listed.stdout.splitlines() if line.startswith("{")]
    assert [node["name"] for node in nodes] == ["raw_drone_flights"]
    assert nodes[0]["config"]["materialized"] == "raw_ingest"
    assert nodes[0]["config"]["meta"] == {"raw_topic": NEW_TOPIC, **override["config"]["meta"]}
    assert set(nodes[0]["depends_on"]["nodes"]) == {
        "source.dynamic_ddl.ingestion.raw_file_ledger",
        "source.dynamic_ddl.ingestion.raw_file_ledger_archive",
        "source.dynamic_ddl.ingestion.raw_schema_registry",
    }


def test_landing_reads_event_times_with_the_formats_its_raw_model_runs_with(project, tmp_path):
    """Found by review: a raw model's meta may override its topic's `time_formats`, and
    raw dated rows by them, while landing's `event_timestamp` read the topic's entry
    only: rows raw dated by an override were undated in landing, and an incremental
    run missed rows a full refresh kept. Landing now reads the formats raw ran with."""
    path = project / "dbt_project.yml"
    config = yaml.safe_load(path.read_text())
    override = {"+meta": {"time_formats": ["dd.MM.yyyy HH:mm"]}}
    config["models"]["dynamic_ddl"].setdefault("raw", {})["raw_app_attributes"] = override
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    env = {"DYNAMIC_DDL_STATE_DIR": str(tmp_path / "state")}
    rendered = {
        topic: dbt(
            project,
            "compile",
            "--inline",
            f"select {{{{ event_timestamp('t', '{topic}') }}}}",
            env=env,
        )
        for topic in ("app_attributes", "device_events")
    }
    for topic, compiled in rendered.items():
        assert compiled.returncode == 0, compiled.stdout[-2000:]
        assert ("'dd.MM.yyyy HH:mm'" in compiled.stdout) == (topic == "app_attributes"), topic


def test_a_topic_without_its_raw_model_stops_the_run_naming_the_command(project):
    """A topic added to the config without `make topics`: dbt fails at the start of the
    run, naming the topic and the command, instead of skipping the topic without a word."""
    set_topics(project, lambda topics: topics.update(drone_flights=NEW_TOPIC))
    assert_run_stops_until_make_topics(project, "drone_flights")


def test_a_raw_model_from_an_older_generator_stops_the_run_naming_the_command(project):
    """A stub whose meta holds the topic's settings at the top (before meta.raw_topic)
    would override its topic: the run stops at its start until `make topics`."""
    stub = model_file(project, "device_state")
    older = stub.read_text().replace("meta={'raw_topic': ", "meta=").replace("}})", "})")
    assert "meta={'record_key'" in older
    stub.write_text(older)
    assert_run_stops_until_make_topics(project, "raw_device_state")


def assert_run_stops_until_make_topics(project: Path, named: str) -> None:
    """on-run-start's check fails naming `named` and `make topics`, and passes after it."""
    run = dbt(project, "run-operation", "check_raw_topics")
    assert run.returncode != 0
    assert named in run.stdout and "make topics" in run.stdout
    assert main(["topics", "--project-dir", str(project)]) == 0
    run = dbt(project, "run-operation", "check_raw_topics")
    assert run.returncode == 0, run.stdout[-2000:]


def test_a_topic_removed_from_the_config_loses_only_its_generated_model(project, capsys):
    """The generated model of a removed topic goes; a hand-written raw_*.py, or a generated
    one edited since, stays, reported."""
    set_topics(project, lambda topics: [topics.pop(t) for t in ("device_state", "app_attributes")])
    hand_written = project / "python_models" / "raw" / "raw_legacy.py"
    hand_written.write_text("def model(dbt, session):\n    return None\n")
    edited = model_file(project, "app_attributes")
    edited.write_text(edited.read_text() + "# a local change\n")
    assert main(["topics", "--project-dir", str(project)]) == 0
    out = capsys.readouterr().out
    assert not model_file(project, "device_state").exists()
    assert f"removed {model_file(project, 'device_state')}" in out
    assert hand_written.exists() and f"left {hand_written}" in out
    assert edited.exists() and f"left {edited}" in out
    assert "_data.event.id" in model_file(project, "device_events").read_text()


def test_a_changed_mode_or_hint_makes_the_raw_model_out_of_date(project):
    """The docs site shows a topic's mode and hints from its model's `meta`: changing
    them in the config makes `topics --check` (lint) fail until `topics` rewrites it."""
    assert main(["topics", "--check", "--project-dir", str(project)]) == 0

    def freeze(topics):
        topics["device_events"]["schema_mode"] = "freeze"

    set_topics(project, freeze)
    assert main(["topics", "--check", "--project-dir", str(project)]) == 1
    assert main(["topics", "--project-dir", str(project)]) == 0
    assert "'schema_mode': 'freeze'" in model_file(project, "device_events").read_text()
