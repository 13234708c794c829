"""Spark settings shared by every way this project starts Spark.

The embedded dbt session, the Thrift + Connect server and the test
SparkSession all take their settings from here, so a query behaves the same
on every target (ANSI on, UTC, the same shuffle width) and local state always
lands under one absolute folder.
"""

from __future__ import annotations

import os
from pathlib import Path

# ANSI on: a cast that cannot hold a value raises instead of returning NULL.
# Code that wants NULL on failure says so with try_cast / try_* functions.
ANSI_ENABLED = "true"

STATE_DIR_ENV = "DYNAMIC_DDL_STATE_DIR"
LOG4J_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"


def project_root() -> Path:
    """The folder holding dbt_project.yml (this package lives in <root>/plugins)."""
    return Path(__file__).resolve().parents[2]


def default_state_dir() -> Path:
    """Where warehouse, metastore and server files live: $DYNAMIC_DDL_STATE_DIR or <root>/.local."""
    configured = os.environ.get(STATE_DIR_ENV)
    return Path(configured).resolve() if configured else project_root() / ".local"


def session_settings() -> dict[str, str]:
    """SQL settings that must match on every target (settable per session)."""
    return {
        "spark.sql.ansi.enabled": ANSI_ENABLED,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        # The metastore's filter parser rejects columns starting with `_`
        # (_slot, _version): fall back to pruning in Spark, by partition
        # names only (fast), not by fetching every partition's metadata.
        "spark.sql.hive.metastorePartitionPruningFallbackOnException": "true",
        "spark.sql.hive.metastorePartitionPruningFastFallback": "true",
        # The metastore parses `day in (...)` as nested ORs and overflows its stack
        # near 1,000 values (an upsert touching 1,000 partitions): above 100 values,
        # send it a range and keep the exact filter in Spark.
        "spark.sql.hive.metastorePartitionPruningInSetThreshold": "100",
        # Pivots are wide `max(case when ...)` plans; inferring filter constraints
        # over them grows without bound (a 1 GiB driver ran out of heap in the
        # optimizer on batch 2 of the sample). Our filters are written explicitly.
        "spark.sql.constraintPropagation.enabled": "false",
        # No `${...}` replaced in statements, literals included: a value sent as a
        # literal (a seed cell `${env:AWS_SECRET_ACCESS_KEY}`) is stored as written.
        "spark.sql.variable.substitute": "false",
        # `describe` writes a struct's type as text, which DDL reads back (an upsert's
        # version store): past 25 fields it was cut (`... 6 more fields`), and the DDL
        # failed (found by review).
        "spark.sql.debug.maxToStringFields": "10000",
        # HotSpot never compiles a method past 8,000 bytes of bytecode: it runs it
        # interpreted. A raw batch's parse (a leaf check per column) made one such
        # whole-stage method, and parsing 400k lines took 6.6 s where 4.5 s was
        # enough. At this limit Spark compiles such a stage operator by operator.
        "spark.sql.codegen.hugeMethodLimit": "8000",
    }


def engine_settings(state_dir: Path) -> dict[str, str]:
    """Settings fixed when the JVM starts: catalog, warehouse, metastore, binding.

    Example:
        >>> engine_settings(Path("/srv/ddl/.local"))["spark.sql.warehouse.dir"]
        '/srv/ddl/.local/warehouse'
    """
    state_dir = Path(state_dir).resolve()
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(state_dir / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={state_dir / 'metastore_db'};create=true"
        ),
        # UTC in the JVM too, whatever the host's zone: what SQL does not take from
        # spark.sql.session.timeZone (Hive's own conversions, logs) agrees with it.
        "spark.driver.extraJavaOptions": (
            f"-Dderby.system.home={state_dir} -Dderby.stream.error.file={state_dir / 'derby.log'} "
            f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG} -Duser.timezone=UTC"
        ),
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.ui.enabled": "false",
        # PySpark 4 sends each Column call's Python call site to the JVM (for error
        # context): about ten py4j round trips per call, a second of every small
        # raw batch, whose plans are built of thousands of Column calls.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.legacy.createHiveTableByDefault": "false",
        # Local files without Hadoop's .crc side files: its checksummed local
        # filesystem builds `.<name>.crc` as a URI and fails on any inbox file
        # whose name holds a colon (`a:b.json`), which every filesystem here allows.
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        # Every raw row's JSON text is unique: a dictionary for it is built, then
        # abandoned, page after page.
        "spark.hadoop.parquet.enable.dictionary#_raw_json": "false",
    }


def all_settings(state_dir: Path) -> dict[str, str]:
    """Engine and session settings together, as given to a new embedded session."""
    return {**engine_settings(state_dir), **session_settings()}
