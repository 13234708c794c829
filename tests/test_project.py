"""The project as a user runs it: the dbt CLI, from another directory, on the embedded target."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

DBT = Path(sys.executable).with_name("dbt")


def dbt_cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run the dbt CLI like a user would, pointing at the project by absolute paths."""
    command = [
        str(DBT),
        *args,
        "--project-dir",
        str(PROJECT_ROOT),
        "--profiles-dir",
        str(PROJECT_ROOT / "profiles"),
    ]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory) -> dict[str, str]:
    """A separate state folder: Derby admits one JVM, and this test's is a subprocess."""
    state = tmp_path_factory.mktemp("cli-state")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBT_")}
    env.update(
        {
            "DYNAMIC_DDL_STATE_DIR": str(state),
            "DBT_TARGET_PATH": str(tmp_path_factory.mktemp("target")),
            "DBT_LOG_PATH": str(tmp_path_factory.mktemp("logs")),
        }
    )
    return env


@pytest.fixture(scope="module")
def inbox(tmp_path_factory) -> Path:
    """Sample JSON for the project's raw models (small: 400 device events per batch)."""
    return tmp_path_factory.mktemp("inbox")


def add_sample_batch(inbox: Path, batch: int) -> None:
    subprocess.run(
        [sys.executable, "-m", "dynamic_ddl.sampledata", "--out", str(inbox)]
        + ["--events", "400", "--batch", str(batch)],
        check=True,
        capture_output=True,
    )


def build(inbox: Path, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return dbt_cli(["build", "--vars", json.dumps({"inbox_dir": str(inbox)})], cwd=cwd, env=env)


def test_build_then_query_from_other_directories(tmp_path, cli_env, inbox):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    add_sample_batch(inbox, 1)
    built = build(inbox, cwd=first, env=cli_env)
    assert built.returncode == 0, built.stdout[-3000:]
    assert "analytics.dim_device_models" in built.stdout
    assert "lnd_app_attributes_pivots_keys_into_columns" in built.stdout  # the unit test ran

    shown = dbt_cli(
        [
            "show",
            "--inline",
            "select model_code, latest_firmware_version, firmware_release_count "
            "from analytics.dim_device_models order by model_code",
            "--limit",
            "-1",
            "--output",
            "json",
            "--log-format",
            "json",
        ],
        cwd=second,
        env=cli_env,
    )
    assert shown.returncode == 0, shown.stdout[-3000:]
    rows = _show_rows(shown.stdout)
    assert len(rows) == 7
    by_model = {row["model_code"]: row for row in rows}
    assert by_model["AC12"]["latest_firmware_version"] == "3.2.0"
    assert by_model["AC11"]["firmware_release_count"] == 3
    state = Path(cli_env["DYNAMIC_DDL_STATE_DIR"])
    assert (state / "warehouse" / "analytics.db" / "dim_device_models").is_dir()
    assert (state / "metastore_db").is_dir()
    assert not (first / "metastore_db").exists() and not (first / "spark-warehouse").exists()


def test_new_batch_adds_pivot_columns(tmp_path, cli_env, inbox):
    """app_attributes' second batch brings new keys: lnd_app_attributes gains their
    columns incrementally, typed, and the first batch's rows hold NULL there."""
    before = _query(cli_env, tmp_path, "select * from analytics.lnd_app_attributes limit 1")
    assert {"city", "app_version"} <= set(before[0]) and "theme" not in before[0]
    add_sample_batch(inbox, 2)
    built = build(inbox, cwd=tmp_path, env=cli_env)
    assert built.returncode == 0, built.stdout[-3000:]
    rows = _query(
        cli_env,
        tmp_path,
        "select _batch_id, count(*) as n, count(theme) as themes, "
        "max(typeof(storage_used_gb)) as gb_type "
        "from analytics.lnd_app_attributes group by _batch_id order by _batch_id",
    )
    assert [row["themes"] for row in rows][0] == 0 and rows[1]["themes"] > 0
    assert rows[1]["gb_type"] == "double"
    assert all(row["n"] > 0 for row in rows)
    # ... and reach production: the user profiles pick the new attributes up.
    (users,) = _query(
        cli_env, tmp_path, "select count(*) as n, count(theme) as themes from analytics.dim_users"
    )
    assert 0 < users["themes"] <= users["n"]


def _query(env: dict[str, str], cwd: Path, sql: str) -> list[dict]:
    shown = dbt_cli(
        ["show", "--inline", sql, "--limit", "-1", "--output", "json", "--log-format", "json"],
        cwd=cwd,
        env=env,
    )
    assert shown.returncode == 0, shown.stdout[-3000:]
    return _show_rows(shown.stdout)


def _show_rows(stdout: str) -> list[dict]:
    for line in stdout.splitlines():
        event = json.loads(line)
        preview = event.get("data", {}).get("preview")
        if preview:
            return json.loads(preview)
    raise AssertionError(f"dbt show printed no preview:\n{stdout[-2000:]}")


def test_unreachable_thrift_target_names_the_fix(tmp_path, cli_env):
    env = {**cli_env, "SPARK_PORT": "1"}
    result = dbt_cli(["debug", "--target", "thrift"], cwd=tmp_path, env=env)
    assert result.returncode != 0
    assert "make thrift-up" in result.stdout


def test_pivot_model_renders_without_a_warehouse(tmp_path, cli_env):
    """dbt parse (no Spark reachable) and the linter both render the pivot model,
    the same way every time, with its default keys."""
    env = {**cli_env, "SPARK_PORT": "1", "DBT_TARGET_PATH": str(tmp_path / "target")}
    parsed = dbt_cli(["parse", "--target", "thrift"], cwd=tmp_path, env=env)
    assert parsed.returncode == 0, parsed.stdout[-3000:]
    manifest = json.loads((tmp_path / "target" / "manifest.json").read_text())
    node = manifest["nodes"]["model.dynamic_ddl.lnd_app_attributes"]
    assert node["depends_on"]["nodes"] == ["model.dynamic_ddl.raw_app_attributes"]
    assert "macro.dynamic_ddl.pivot_key_values" in node["depends_on"]["macros"]

    sqlfluff = Path(sys.executable).with_name("sqlfluff")
    model = "models/landing/lnd_app_attributes.sql"
    renders = [
        subprocess.run(
            [str(sqlfluff), "render", model],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        for _ in range(2)
    ]
    assert renders[0].returncode == 0, renders[0].stderr[-2000:]
    assert renders[0].stdout == renders[1].stdout
    for key in ("app_version", "city", "state"):
        case = f"pivot_rows.`record_key` = '{key}' then pivot_rows.`record_value`"
        assert case in renders[0].stdout
