"""dbt adapter `dynamic_spark`: everything from dbt-spark, plus Python models on
open-source Spark (in-process session or Spark Connect) and safe rebuilds."""

from pathlib import Path

from dbt.adapters.base import AdapterPlugin

from dynamic_ddl.adapter.credentials import DynamicSparkCredentials
from dynamic_ddl.adapter.impl import DynamicSparkAdapter

Plugin = AdapterPlugin(
    adapter=DynamicSparkAdapter,
    credentials=DynamicSparkCredentials,
    include_path=str(Path(__file__).parent / "dynamic_spark"),
    dependencies=["spark"],
)
