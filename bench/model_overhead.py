"""Per-model overhead of Python models: a trivial Python model vs a trivial SQL model.

Builds a two-model dbt project in a scratch folder and runs it several times
on each target (`session`: in-process; `thrift`: SQL over Thrift, Python over
Spark Connect, on a server this script starts and stops). Times come from
dbt's own run_results.json (`execution_time` per model).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from dynamic_ddl import spark_conf

RUNS = 4
DBT = Path(sys.executable).with_name("dbt")
# Every dbt run starts a fresh JVM (session) or session (thrift), whose first
# write is slow; a warm-up model both trivial models depend on pays for it.
WARMUP_SQL = "{{ config(materialized='table') }}\nselect 1 as id\n"
TRIVIAL_SQL = (
    "{{ config(materialized='table') }}\n-- depends_on: {{ ref('warmup') }}\nselect 1 as id\n"
)
TRIVIAL_PY = """def model(dbt, session):
    dbt.config(materialized="table")
    dbt.ref("warmup")
    return session.range(1)
"""


def write_project(root: Path, state_dir: Path, thrift_port: int, connect_port: int) -> None:
    """A scratch dbt project with one trivial SQL and one trivial Python model."""
    (root / "models").mkdir(parents=True)
    (root / "models" / "warmup.sql").write_text(WARMUP_SQL)
    (root / "models" / "trivial_sql.sql").write_text(TRIVIAL_SQL)
    (root / "models" / "trivial_py.py").write_text(TRIVIAL_PY)
    project = {
        "name": "overhead",
        "version": "1.0",
        "config-version": 2,
        "profile": "overhead",
        "flags": {"send_anonymous_usage_stats": False},
    }
    (root / "dbt_project.yml").write_text(yaml.safe_dump(project))
    ansi = {"spark.sql.ansi.enabled": "true"}
    profiles = {
        "overhead": {
            "target": "session",
            "outputs": {
                "session": {
                    "type": "dynamic_spark",
                    "method": "session",
                    "schema": "overhead",
                    "state_dir": str(state_dir / "session"),
                    "server_side_parameters": ansi,
                },
                "thrift": {
                    "type": "dynamic_spark",
                    "method": "thrift",
                    "host": "127.0.0.1",
                    "port": thrift_port,
                    "user": "bench",
                    "schema": "overhead",
                    "connect_url": f"sc://localhost:{connect_port}",
                    "server_side_parameters": ansi,
                },
            },
        }
    }
    (root / "profiles.yml").write_text(yaml.safe_dump(profiles))


def model_times(root: Path, target: str) -> dict[str, float]:
    """Run the project once; return each model's execution_time from run_results.json."""
    subprocess.run(
        [
            str(DBT),
            "run",
            "--target",
            target,
            "--project-dir",
            str(root),
            "--profiles-dir",
            str(root),
            "--quiet",
        ],
        check=True,
        cwd=root,
        env={**os.environ, "DBT_PROFILES_DIR": str(root)},
    )
    results = json.loads((root / "target" / "run_results.json").read_text())["results"]
    return {r["unique_id"].split(".")[-1]: r["execution_time"] for r in results}


def measure(root: Path, target: str) -> dict[str, float]:
    """Median seconds per model over RUNS runs, after one warm-up run."""
    model_times(root, target)
    samples = [model_times(root, target) for _ in range(RUNS)]
    return {name: statistics.median(s[name] for s in samples) for name in samples[0]}


def main() -> dict[str, dict[str, float]]:
    from dynamic_ddl.server import TOKEN_ENV, ServerConfig, start_server, stop_server

    state = spark_conf.default_state_dir() / "bench" / "overhead"
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        config = ServerConfig(
            state_dir=state / "server", master="local[2]", thrift_port=10090, connect_port=15090
        )
        write_project(root, state, config.thrift_port, config.connect_port)
        results["session"] = measure(root, "session")
        # dbt finds the server's Connect token where the profile looks for it.
        os.environ[TOKEN_ENV] = start_server(config).connect_token
        try:
            results["thrift"] = measure(root, "thrift")
        finally:
            stop_server(config.state_dir)
    return results


def report(results: dict[str, dict[str, float]]) -> str:
    """A markdown table: per target, SQL time, Python time, and the Python overhead."""
    lines = [
        "| target (Python method) | trivial SQL model, s | trivial Python model, s | overhead, s |",
        "|---|---|---|---|",
    ]
    for target, method in (("session", "session"), ("thrift", "connect")):
        times = results[target]
        lines.append(
            f"| {target} ({method}) | {times['trivial_sql']:.2f} | {times['trivial_py']:.2f} "
            f"| {times['trivial_py'] - times['trivial_sql']:+.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(main()))
