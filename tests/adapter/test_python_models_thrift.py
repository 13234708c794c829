"""The Python-model suites again, on the `thrift` target: SQL over Thrift, Python over
Spark Connect, both served by one JVM the test run starts."""

from __future__ import annotations

import pytest

from tests.adapter.targets import thrift_profile
from tests.adapter.test_python_models import (
    ChainSuite,
    FailingIncrementalSuite,
    FailingTableSuite,
    IncrementalThisSuite,
    PySparkSuite,
    PythonEmptySuite,
    PythonIncrementalSuite,
    PythonModelSuite,
)
from tests.adapter.test_upsert_models import UpsertModelsSuite


class ThriftTarget:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, thrift_server):
        return thrift_profile(thrift_server)


class TestPythonModelThrift(ThriftTarget, PythonModelSuite):
    pass


class TestPySparkThrift(ThriftTarget, PySparkSuite):
    pass


class TestPythonIncrementalThrift(ThriftTarget, PythonIncrementalSuite):
    pass


class TestPythonEmptyThrift(ThriftTarget, PythonEmptySuite):
    pass


class TestFailingTableThrift(ThriftTarget, FailingTableSuite):
    pass


class TestFailingIncrementalThrift(ThriftTarget, FailingIncrementalSuite):
    pass


class TestChainThrift(ThriftTarget, ChainSuite):
    pass


class TestIncrementalThisThrift(ThriftTarget, IncrementalThisSuite):
    pass


class TestUpsertModelsThrift(ThriftTarget, UpsertModelsSuite):
    """Both upsert faces, pulls and rollback with SQL over Thrift, Python over Connect."""
