"""Run a compiled dbt Python model on open-source Spark.

dbt compiles a Python model into one script: the model's own code, then a
postfix that calls `model(dbt, spark)` and writes the result. The script
expects a global `spark`. Two ways to supply it:

- session: the SparkSession the SQL models use in this process (one JVM,
  one catalog, temp views shared);
- connect: a Spark Connect session on the server that serves the target's
  SQL over Thrift (one driver, one catalog).
"""

from __future__ import annotations

import linecache
import logging
import os
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from dbt.adapters.base import PythonJobHelper
from dbt_common.exceptions import DbtRuntimeError

from dynamic_ddl import spark_conf

# First line of the script our macro writes; dbt's wrappers may indent the
# text before it, and the model's own code starts right after it.
SCRIPT_MARKER = "# dynamic_spark: model code starts on the next line"

# pyspark's switch for "this process talks to Spark over Connect".
CONNECT_MODE_ENV = "SPARK_CONNECT_MODE_ENABLED"


class _DbtLogHandler(logging.Handler):
    """Our modules' log records (a raw model's progress) as lines of dbt's own log."""

    def emit(self, record: logging.LogRecord) -> None:
        from dbt.adapters.events.logging import AdapterLogger

        logger = AdapterLogger("dynamic_spark")
        message = self.format(record)
        (logger.warning if record.levelno >= logging.WARNING else logger.info)(message)


def bridge_logs_to_dbt() -> None:
    """Send the `dynamic_ddl` loggers to dbt's log (console and logs/dbt.log), once."""
    package = logging.getLogger("dynamic_ddl")
    if not any(isinstance(h, _DbtLogHandler) for h in package.handlers):
        package.addHandler(_DbtLogHandler())
        package.setLevel(logging.INFO)
        package.propagate = False


def run_model_script(compiled_code: str, spark: Any, model: dict) -> None:
    """Execute a compiled Python model with `spark` bound; failures keep the model's traceback.

    The model's code comes first in the compiled script, so the line numbers
    in the traceback are the lines of the model's .py file.
    """
    bridge_logs_to_dbt()
    filename = model.get("original_file_path") or f"<python model {model['name']}>"
    compiled_code = model_script(compiled_code)
    lines = compiled_code.splitlines(keepends=True)
    # mtime None: linecache keeps our copy rather than re-reading the file.
    linecache.cache[filename] = (len(compiled_code), None, lines, filename)
    code = compile(compiled_code, filename, "exec")
    try:
        exec(code, {"spark": spark, "__name__": "__dbt_python_model__"})
    except Exception as error:
        raise DbtRuntimeError(
            f"Python model '{model['name']}' failed; {_left_as(model)}\n" + model_traceback(error)
        ) from None


def _left_as(model: dict) -> str:
    """What a failed model left behind, as its materialization leaves it (a raw model
    commits batch by batch: found by review, it was said to leave its table as it was).

    Example:
        >>> _left_as({"config": {"materialized": "raw_ingest"}}).split(";")[0]
        'the batches it committed before stay'
    """
    if model.get("config", {}).get("materialized") == "raw_ingest":
        return (
            "the batches it committed before stay; the failed one stays pending, and the"
            " next run does it again."
        )
    return "the table it writes was left as it was."


def model_script(compiled_code: str) -> str:
    """The script from the model's first line on, so line numbers match its .py file."""
    _, marker, script = compiled_code.partition(SCRIPT_MARKER + "\n")
    return script if marker else compiled_code


def model_traceback(error: BaseException) -> str:
    """The traceback of an error raised inside a model, without this module's frame."""
    tb = error.__traceback__
    tb = tb.tb_next if tb is not None else None  # skip run_model_script's exec frame
    return "".join(traceback.format_exception(type(error), error, tb))


def open_connect_session(url: str, token: str | None = None) -> Any:
    """A new Spark Connect session with the project's SQL settings.

    New for every model: a server-side session caches file listings, so one
    kept across models would miss files that Thrift statements rewrote since.
    The token goes to the channel, never into the URL (which errors and logs show).
    """
    from pyspark.sql.connect.client import DefaultChannelBuilder
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = None
    try:
        channel = DefaultChannelBuilder(url)
        if token:
            channel.set(DefaultChannelBuilder.PARAM_TOKEN, token)
        # The Connect builder directly: a classic session may exist in this
        # process (the tests run both targets), and the generic builder refuses.
        session = ConnectSession.builder.channelBuilder(channel).create()
        for key, value in spark_conf.session_settings().items():
            session.conf.set(key, value)
    except Exception as error:
        if session is not None:
            # Closed without a call to the server: a client left open calls it again at
            # exit, and retries for minutes once the server is gone.
            with suppress(Exception):
                session.client.close()
        raise DbtRuntimeError(
            f"Cannot reach Spark Connect at {url} to run Python models: {error}\n"
            "Start the local server with `make thrift-up` (it serves Thrift and "
            "Connect), or set connect_url in the profile / DYNAMIC_DDL_CONNECT_URL. "
            "A server that demands a token takes it from connect_token in the profile or "
            "SPARK_CONNECT_AUTHENTICATE_TOKEN (local server: python -m dynamic_ddl.server token)."
        ) from None
    return session


class _ConnectModeUsers:
    """How many models run in Connect mode now: with `threads: 2` two run at once, and
    the environment switch may only be restored when the last one ends."""

    lock = threading.Lock()
    count = 0
    previous: str | None = None


@contextmanager
def connect_mode(session: Any) -> Iterator[None]:
    """Make `session` the active one, in Connect mode, while a model runs.

    pandas-on-Spark (and any code calling SparkSession.getActiveSession())
    finds its session this way; without it, it would start a local JVM.
    """
    from pyspark import SparkContext
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    if SparkContext._active_spark_context is None:
        # No classic session in this process (a dbt run on a server target): switched
        # on for good. Switching it off again raced with dbt threads reading the
        # environment (a unit test failed on KeyError 'SPARK_CONNECT_MODE_ENABLED').
        os.environ[CONNECT_MODE_ENV] = "1"
        ConnectSession._set_default_and_active_session(session)
        yield
        return
    users = _ConnectModeUsers
    with users.lock:
        if users.count == 0:
            users.previous = os.environ.get(CONNECT_MODE_ENV)
            os.environ[CONNECT_MODE_ENV] = "1"
        users.count += 1
    ConnectSession._set_default_and_active_session(session)
    try:
        yield
    finally:
        with users.lock:
            users.count -= 1
            if users.count == 0:
                if users.previous is None:
                    os.environ.pop(CONNECT_MODE_ENV, None)
                else:
                    os.environ[CONNECT_MODE_ENV] = users.previous


class SessionPythonJobHelper(PythonJobHelper):
    """Runs a Python model on the in-process SparkSession of the `session` target."""

    def __init__(self, parsed_model: dict, credentials: Any) -> None:
        self.parsed_model = parsed_model
        self.credentials = credentials

    def submit(self, compiled_code: str) -> None:
        from pyspark.sql import SparkSession

        # The SQL models' session exists already (dbt opened a connection);
        # getOrCreate with no options returns it unchanged.
        spark = SparkSession.builder.getOrCreate()
        run_model_script(compiled_code, spark, self.parsed_model)


class ConnectPythonJobHelper(PythonJobHelper):
    """Runs a Python model over Spark Connect, next to the target's Thrift SQL."""

    def __init__(self, parsed_model: dict, credentials: Any) -> None:
        self.parsed_model = parsed_model
        self.credentials = credentials

    def submit(self, compiled_code: str) -> None:
        spark = open_connect_session(
            self.credentials.resolved_connect_url, self.credentials.resolved_connect_token
        )
        try:
            with connect_mode(spark):
                run_model_script(compiled_code, spark, self.parsed_model)
        finally:
            spark.stop()
