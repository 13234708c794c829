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


def test_build_then_query_from_other_directories(tmp_path, cli_env):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    built = dbt_cli(
        [
            "build",
            "--select",
            "resource_type:seed",
            "resource_type:model",
            "--exclude",
            "path:python_models",
        ],
        cwd=first,
        env=cli_env,
    )
    assert built.returncode == 0, built.stdout[-3000:]
    assert "analytics.dim_device_models" in built.stdout

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
        assert f"pivot_rows.`record_key` = '{key}' then pivot_rows.`record_value`" in renders[0].stdout
