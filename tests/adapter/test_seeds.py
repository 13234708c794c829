"""Seed values reach their table as written, on both targets: quotes, backslashes, times
to the microsecond, and `${...}`, which Spark replaces inside a literal by a variable
(the server's environment, a Java property, a setting) unless told not to."""

from __future__ import annotations

import pytest
from dbt.tests.util import run_dbt

from tests.adapter.targets import session_profile, thrift_profile

VALUES = [
    "it's",
    "back\\slash",
    "${env:HOME}",
    "${system:user.name}",
    "${spark.sql.session.timeZone}",
]
SEED = "id,value,at\n" + "".join(
    f'{i},"{value}",2026-11-01 10:00:00.123456\n' for i, value in enumerate(VALUES)
)


# Cells dbt reads as numbers and zoned times (found by review: sent as floats, the big
# integer lost its last digit and 1e400 failed as a column name; the offset was dropped).
NUMBERS = (
    "id,big,ratio,at\n"
    "1,9007199254740993,0.1,2026-11-01T10:00:00.123456+05:30\n"
    "2,-9223372036854775808,1e400,2026-11-01T10:00:00.5Z\n"
)


class SeedSuite:
    @pytest.fixture(scope="class")
    def seeds(self):
        return {"hostile.csv": SEED, "numbers.csv": NUMBERS}

    def test_seed_values_are_stored_as_written(self, project):
        """Found by review: a seed cell `${env:HOME}` stored the server's home folder
        (a secret in an environment variable would have been stored as well), and the
        session target cut times to milliseconds."""
        run_dbt(["seed"])
        rows = project.run_sql(
            f"select id, value, cast(at as string) from {project.test_schema}.hostile order by id",
            fetch="all",
        )
        assert [row[1] for row in rows] == VALUES
        assert {row[2] for row in rows} == {"2026-11-01 10:00:00.123456"}
        numbers = project.run_sql(
            "select cast(big as string), cast(ratio as string), cast(at as string)"
            f" from {project.test_schema}.numbers order by id",
            fetch="all",
        )
        assert [tuple(row) for row in numbers] == [
            ("9007199254740993", "0.1", "2026-11-01 04:30:00.123456"),
            ("-9223372036854775808", "Infinity", "2026-11-01 10:00:00.5"),
        ]


class TestSeedsSession(SeedSuite):
    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()


class TestSeedsThrift(SeedSuite):
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, thrift_server):
        return thrift_profile(thrift_server)
