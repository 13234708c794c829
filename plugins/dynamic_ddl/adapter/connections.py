"""dbt-spark's connection manager under our adapter type, with failures that name the fix."""

from __future__ import annotations

from dbt.adapters.contracts.connection import Connection
from dbt.adapters.exceptions import FailedToConnectError
from dbt.adapters.spark.connections import SparkConnectionManager, SparkConnectionMethod


class DynamicSparkConnectionManager(SparkConnectionManager):
    TYPE = "dynamic_spark"

    @classmethod
    def open(cls, connection: Connection) -> Connection:
        try:
            return super().open(connection)
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
