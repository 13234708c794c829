"""Profile targets for dbt's functional test framework, one per way we run Spark."""

from __future__ import annotations

import pytest

from tests.conftest import PROJECT_ROOT, TEST_STATE_DIR, session_target


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


class WithProjectMacros:
    """A dbt test project on the embedded session with these of the project's macro
    files, named like the project so that their `dynamic_ddl.` calls resolve."""

    MACRO_FILES: tuple[str, ...] = ()

    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()

    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"name": "dynamic_ddl"}

    @pytest.fixture(scope="class")
    def macros(self):
        return {name: (PROJECT_ROOT / "macros" / name).read_text() for name in self.MACRO_FILES}
