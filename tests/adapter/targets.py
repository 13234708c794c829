"""Profile targets for dbt's functional test framework, one per way we run Spark."""

from __future__ import annotations

from tests.conftest import TEST_STATE_DIR, session_target


def session_profile() -> dict:
    return session_target(TEST_STATE_DIR)


def thrift_profile(server) -> dict:
    return {
        "type": "dynamic_spark",
        "method": "thrift",
        "host": "127.0.0.1",
        "port": server.thrift_port,
        "user": "dbt",
        "schema": "analytics",
        "connect_url": server.connect_url,
        "connect_token": server.connect_token,
        "threads": 1,
        "server_side_parameters": {"spark.sql.ansi.enabled": "true"},
    }
