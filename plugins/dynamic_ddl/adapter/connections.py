"""dbt-spark's connection manager under our adapter type, with failures that name the fix."""

from __future__ import annotations

import os
from typing import Any

from dbt.adapters.contracts.connection import Connection
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import (
    PyhiveConnectionWrapper,
    SparkConnectionManager,
    SparkConnectionMethod,
)
from dbt.adapters.spark.session import SessionConnectionWrapper

from dynamic_ddl import pii
from dynamic_ddl.adapter.python_jobs import CONNECT_MODE_ENV
from dynamic_ddl.catalog import session_rows
from dynamic_ddl.sql_text import bound_text, string_literal


class EscapingSessionConnectionWrapper(SessionConnectionWrapper):
    """dbt-spark's session wrapper, with bound values rendered as safe SQL literals.

    Upstream pastes strings between quotes unescaped (a seed value holding a
    quote breaks the statement, one holding `${env:NAME}` stores that variable),
    renders None as the string 'None', sends numbers as floats and cuts times to
    milliseconds (sql_text.bound_text).
    """

    @classmethod
    def _fix_binding(cls, value: Any) -> str:
        text = bound_text(value)
        if text is None:
            return "null"
        if isinstance(value, bool):
            return text
        # string_literal escapes `$` too: Spark replaces `${env:...}` in a literal by
        # the server's environment (found by review: a seed cell could store a secret).
        return string_literal(text)

    def fetchall(self) -> list[Any] | None:
        """The rows, with TIMESTAMP values in UTC as on every target (session_rows)."""
        rows = super().fetchall()
        frame = getattr(self._cursor, "_df", None)  # dbt-spark's cursor keeps its DataFrame
        return session_rows(frame, rows) if rows and frame is not None else rows


class ExactPyhiveConnectionWrapper(PyhiveConnectionWrapper):
    """dbt-spark's Thrift wrapper, with numbers and times bound as sql_text.bound_text
    writes them (PyHive quotes the text; the seed's cast reads it exactly)."""

    @classmethod
    def _fix_binding(cls, value: Any) -> Any:
        return value if value is None or isinstance(value, str) else bound_text(value)


class DynamicSparkConnectionManager(SparkConnectionManager):
    TYPE = "dynamic_spark"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        if connection.credentials.method == SparkConnectionMethod.SESSION:
            classic_mode_for_a_new_session()
        try:
            connection = super().open(connection)
        except FailedToConnectError as error:
            creds = connection.credentials
            if creds.method == SparkConnectionMethod.SESSION:
                hint = (
                    "The embedded Spark session did not start. Check `java -version` "
                    "(Java 17+ is needed) and that no other process holds the Derby "
                    f"metastore in {creds.state_dir}."
                )
            else:
                hint = (
                    f"No Spark Thrift server answers at {creds.host}:{creds.port}. "
                    "Start one with `make thrift-up`, or set SPARK_HOST / SPARK_PORT "
                    "to point at yours."
                )
            raise FailedToConnectError(f"{hint}\n({error.msg})") from error
        if isinstance(connection.handle, SessionConnectionWrapper):
            connection.handle = EscapingSessionConnectionWrapper(connection.handle.handle)
        elif type(connection.handle) is PyhiveConnectionWrapper:
            handle = connection.handle
            connection.handle = ExactPyhiveConnectionWrapper(
                handle.handle, handle.poll_interval, handle.query_timeout, handle.query_retries
            )
        salt = connection.credentials.pii_salt()
        if salt is not None:
            # On the handle itself: dbt logs the statements it runs, and the salt
            # must be in no file dbt writes (dynamic_ddl/pii.py).
            # (dbt-spark's wrappers: cursor() returns the wrapper, whose close() would
            # close the connection; the next statement's cursor() replaces this one.)
            connection.handle.cursor().execute(pii.declare_salt_sql(salt))
        return connection


def classic_mode_for_a_new_session() -> None:
    """Switch Connect mode off when this process is about to start its first classic
    session: python_jobs.connect_mode leaves it on in a process that had none (a
    thrift model run first, as tests do), and pyspark would then look for a Connect
    server instead of starting the embedded one (found by review)."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is None:
        os.environ.pop(CONNECT_MODE_ENV, None)
