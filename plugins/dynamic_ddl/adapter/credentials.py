"""Profile fields of `type: dynamic_spark`: dbt-spark's, plus where state and Connect live."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dbt.adapters.spark.connections import SparkConnectionMethod, SparkCredentials
from dbt_common.exceptions import DbtRuntimeError

from dynamic_ddl import pii, spark_conf

CONNECT_URL_ENV = "DYNAMIC_DDL_CONNECT_URL"
CONNECT_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
DEFAULT_CONNECT_PORT = 15002


@dataclass
class DynamicSparkCredentials(SparkCredentials):
    """dbt-spark credentials that keep the profile's ANSI setting and pin local state.

    Extra, optional profile fields:
        state_dir: session target only; folder for the warehouse and the Derby
            metastore (default: $DYNAMIC_DDL_STATE_DIR, else <project>/.local).
        connect_url: thrift target only; the Spark Connect endpoint Python
            models run on (default: $DYNAMIC_DDL_CONNECT_URL, else
            sc://localhost:15002 for a local host, else sc://<host>:15002).
        connect_token: thrift target only; the token Spark Connect demands
            (default: $SPARK_CONNECT_AUTHENTICATE_TOKEN; `make thrift-up` makes
            a new one at every start). Never shown by dbt.
    """

    state_dir: str | None = None
    connect_url: str | None = None
    connect_token: str | None = None

    def __post_init__(self) -> None:
        # dbt-spark forces ANSI off; we keep what the profile says (default on),
        # so a bad cast fails loudly on every target.
        ansi = str(
            self.server_side_parameters.get("spark.sql.ansi.enabled", spark_conf.ANSI_ENABLED)
        )
        if self.method == SparkConnectionMethod.SESSION and self.host is None:
            self.host = "localhost"  # dbt-spark requires a host, a session has none
        super().__post_init__()
        self.server_side_parameters["spark.sql.ansi.enabled"] = ansi.lower()
        # Every target in UTC: raw `_event_date`, commit times and `_ingested_at` are UTC
        # (Python models always run in UTC), and a day must mean the same day in SQL.
        zone = self.server_side_parameters.setdefault("spark.sql.session.timeZone", "UTC")
        check_utc(str(zone))
        if self.method == SparkConnectionMethod.SESSION:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind the embedded JVM locally
            state = (
                Path(self.state_dir).resolve() if self.state_dir else spark_conf.default_state_dir()
            )
            self.state_dir = str(state)
            defaults = spark_conf.all_settings(state)
            self.server_side_parameters = {**defaults, **self.server_side_parameters}

    def pii_salt(self) -> str | None:
        """mask_pii's salt for this target (dynamic_ddl/pii.py), None when it has none."""
        embedded = self.method == SparkConnectionMethod.SESSION
        return pii.resolve_salt(embedded, Path(self.state_dir) if embedded else None)

    @property
    def type(self) -> str:
        return "dynamic_spark"

    @property
    def resolved_connect_url(self) -> str:
        """The Spark Connect URL Python models use on a non-session target.

        A local host is named `localhost`: pyspark sends a token without TLS to no other name.
        """
        host = "localhost" if self.host in ("127.0.0.1", "::1", "localhost") else self.host
        return (
            self.connect_url
            or os.environ.get(CONNECT_URL_ENV)
            or f"sc://{host}:{DEFAULT_CONNECT_PORT}"
        )

    @property
    def resolved_connect_token(self) -> str | None:
        """The Spark Connect token: the profile's, else $SPARK_CONNECT_AUTHENTICATE_TOKEN."""
        return self.connect_token or os.environ.get(CONNECT_TOKEN_ENV) or None

    def _connection_keys(self) -> tuple[str, ...]:
        return (*super()._connection_keys(), "state_dir", "connect_url")


# The names Spark takes for UTC that a profile is likely to write.
UTC_NAMES = {
    *("utc", "etc/utc", "uct", "etc/uct", "universal", "etc/universal", "zulu", "etc/zulu"),
    *("gmt", "etc/gmt", "gmt0", "etc/gmt0", "gmt+0", "gmt-0", "etc/gmt+0", "etc/gmt-0"),
    *("greenwich", "etc/greenwich", "z", "+00", "+00:00", "-00:00", "utc+00:00"),
}


def check_utc(zone: str) -> None:
    """Refuse a profile's session time zone other than UTC, naming the fix.

    Found by review: a profile's zone applied to SQL models only, so a landing
    model's days (in that zone) missed the raw rows of their `_event_date`
    (UTC), and incremental days differed from a build from scratch.

    Example:
        >>> check_utc("UTC"), check_utc("Etc/UTC")
        (None, None)
        >>> check_utc("America/New_York")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dbt_common.exceptions.base.DbtRuntimeError: Runtime Error
          server_side_parameters sets spark.sql.session.timeZone to 'America/New_York'...
    """
    if zone.strip().lower() not in UTC_NAMES:
        raise DbtRuntimeError(
            f"server_side_parameters sets spark.sql.session.timeZone to {zone!r}, but"
            " dynamic_ddl computes every day in UTC (raw _event_date, commit times), and"
            " Python models always run in UTC: remove the setting, or set it to UTC."
            " Convert times for display in a model instead (from_utc_timestamp)."
        )
