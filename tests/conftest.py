"""Shared fixtures: one SparkSession and one local state folder per test run.

The state folder is set before anything starts Spark, so the test session,
dbt's embedded `session` target (same process, same JVM) and the Thrift
server the tests start all keep their warehouses and metastores under
<project>/.local/pytest, away from the user's own .local state.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dynamic_ddl import spark_conf

PROJECT_ROOT = spark_conf.project_root()
TEST_STATE_DIR = PROJECT_ROOT / ".local" / "pytest"
DBT = Path(sys.executable).with_name("dbt")  # the CLI of this virtualenv
os.environ[spark_conf.STATE_DIR_ENV] = str(TEST_STATE_DIR)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# A lock a test leaves held fails the next run within a minute, not ten.
os.environ.setdefault("DYNAMIC_DDL_LOCK_WAIT_SECONDS", "60")

pytest_plugins = ["dbt.tests.fixtures.project"]


def pytest_sessionstart(session: pytest.Session) -> None:
    """Start every run from an empty warehouse and metastore."""
    shutil.rmtree(TEST_STATE_DIR, ignore_errors=True)
    TEST_STATE_DIR.mkdir(parents=True)


@pytest.fixture(scope="session")
def state_dir() -> Path:
    return TEST_STATE_DIR


@pytest.fixture(scope="session")
def spark(state_dir: Path):
    """The one in-process SparkSession: local[2], UI off, UTC, ANSI on, Hive catalog."""
    from pyspark.sql import SparkSession

    from dynamic_ddl.adapter.connections import classic_mode_for_a_new_session

    classic_mode_for_a_new_session()  # a thrift model may have run in this process first
    builder = SparkSession.builder.master("local[2]").appName("dynamic_ddl-tests")
    for key, value in spark_conf.all_settings(state_dir).items():
        builder = builder.config(key, value)
    session = builder.enableHiveSupport().getOrCreate()
    yield session
    session.stop()


def session_target(state_dir: Path, schema: str = "analytics") -> dict:
    """A dbt profile target for the embedded session on the test state folder."""
    return {
        "type": "dynamic_spark",
        "method": "session",
        "schema": schema,
        "state_dir": str(state_dir),
        "threads": 1,
        "server_side_parameters": {"spark.sql.ansi.enabled": "true"},
    }


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def thrift_server(state_dir: Path):
    """One Thrift + Spark Connect server for the whole run, stopped by its PID at the end.

    Its Connect token is put in this process's environment, where pyspark (here and in the
    processes tests start) finds it; dbt profiles pass it explicitly.
    """
    from dynamic_ddl.server import TOKEN_ENV, ServerConfig, start_server, stop_server

    config = ServerConfig(
        state_dir=state_dir / "server",
        master="local[2]",
        thrift_port=free_port(),
        connect_port=free_port(),
        driver_memory="2g",
        timeout=240,
    )
    # The server runs in a zone far from UTC (its JVM, its Python): the results must
    # not depend on it (test_project compares it with the other engines).
    host_zone = os.environ.get("TZ")
    os.environ["TZ"] = "America/Los_Angeles"
    try:
        info = start_server(config)
    finally:
        if host_zone is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = host_zone
    os.environ[TOKEN_ENV] = info.connect_token
    yield info
    os.environ.pop(TOKEN_ENV, None)
    stop_server(config.state_dir)


@contextmanager
def connect_to_fresh_schema(server, schema: str) -> Iterator:
    """A Spark Connect session on `server`, with `schema` dropped and created anew."""
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession.builder.remote(server.connect_url).create()
    session.sql(f"drop schema if exists {schema} cascade")
    session.sql(f"create schema {schema}")
    try:
        yield session
    finally:
        session.stop()
