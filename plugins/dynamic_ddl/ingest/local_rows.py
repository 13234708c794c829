"""Small DataFrames from rows held in Python (ledger, registry, summaries), through Arrow.

`spark.createDataFrame(list_of_tuples)` on a classic session ships pickled rows through
Python worker processes (a fork per task: seconds per call on a busy machine, and
Python in the write path). From an Arrow table the rows go to the JVM directly, and
Spark Connect sends them the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType


def local_dataframe(spark: SparkSession, rows: Sequence[tuple], schema: str) -> DataFrame:
    """A DataFrame of `rows` with the DDL `schema` ("name type, ..."); no Python workers.

    Naive datetimes are read as UTC, the project's session time zone.
    """
    struct = DataType.fromDDL(schema)
    arrow_schema = to_arrow_schema(struct, timezone="UTC")
    table = pa.Table.from_pylist(
        [dict(zip(struct.names, row, strict=True)) for row in rows], arrow_schema
    )
    return spark.createDataFrame(table, schema=struct)  # an empty table infers nothing
