"""The dynamic_spark adapter: dbt-spark, plus Python models on open-source Spark."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from importlib import import_module
from typing import Any

from dbt.adapters.base import PythonJobHelper, available
from dbt.adapters.base.impl import AdapterTrackingRelationInfo
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.events.logging import AdapterLogger
from dbt.adapters.spark import SparkAdapter, SparkColumn
from dbt.adapters.spark.connections import SparkConnectionMethod
from dbt.adapters.spark.impl import KEY_TABLE_OWNER, KEY_TABLE_STATISTICS
from dbt.artifacts.resources import ColumnInfo
from dbt.flags import get_flags
from dbt_common.exceptions import CompilationError, DbtRuntimeError
from dbt_common.invocation import get_invocation_id

from dynamic_ddl.adapter.connections import DynamicSparkConnectionManager
from dynamic_ddl.adapter.discovered_columns import (
    PATTERN_META_KEY,
    REGISTRY_TABLE,
    DiscoveredColumn,
    descriptions_from_pattern,
    descriptions_to_add,
    registry_query,
)
from dynamic_ddl.adapter.python_jobs import ConnectPythonJobHelper, SessionPythonJobHelper
from dynamic_ddl.catalog import is_heading, read_settled, struct_types_for_ddl
from dynamic_ddl.sql_text import quoted_identifier

# Commands that build models: a table a killed repartition hid is mended when they list
# its schema (DynamicSparkAdapter.list_relations_without_caching).
BUILDING = {"run", "build", "seed", "snapshot"}
MENDED = {
    "undone": (
        "a repartition killed between its first swap's two renames hid the table; it is"
        " back under its layout before, the repartition undone: run it again if wanted."
    ),
    "finished": (
        "a repartition killed between its last swap's two renames hid the table; it is"
        " finished: the table has its new layout, which the model's partition_by must say."
    ),
}


class DynamicSparkAdapter(SparkAdapter):
    """SparkAdapter with `session` and `connect` Python submission methods.

    The method follows the target: a `session` target runs Python models on
    its own in-process SparkSession; any other target runs them over Spark
    Connect on the server that also serves its SQL.
    """

    ConnectionManager = DynamicSparkConnectionManager

    @property
    def default_python_submission_method(self) -> str:
        if self.config.credentials.method == SparkConnectionMethod.SESSION:
            return "session"
        return "connect"

    @property
    def python_submission_helpers(self) -> dict[str, type[PythonJobHelper]]:
        return {
            **super().python_submission_helpers,
            "session": SessionPythonJobHelper,
            "connect": ConnectPythonJobHelper,
        }

    def parse_describe_extended(self, relation: Any, raw_rows: Any) -> list[SparkColumn]:
        """Upstream's, keeping the columns whose names start with `#` (`#events`), which
        it drops as comments: every row before the first heading is a column
        (find_table_information_separator). Found by review: such a column was missing
        from get_columns_in_relation (snapshots, table_checksums, the PII test)."""
        rows = [dict(zip(row._keys, row._values, strict=True)) for row in raw_rows]
        position = self.find_table_information_separator(rows)
        metadata = {row["col_name"]: row["data_type"] for row in rows[position + 1 :]}
        owner, stats = metadata.get(KEY_TABLE_OWNER), metadata.get(KEY_TABLE_STATISTICS)
        # As DDL reads them back: snapshots and on_schema_change write these types into
        # SQL (`cast(null as struct<a-b:int>)` failed; found by review).
        columns = struct_types_for_ddl(
            self._fetch_rows,
            _described_name(relation),
            [(row["col_name"], row["data_type"]) for row in rows[:position]],
        )
        return [
            SparkColumn(
                table_database=None,
                table_schema=relation.schema,
                table_name=relation.name,
                table_type=relation.type,
                table_owner=str(owner),
                table_stats=SparkColumn.convert_table_stats(stats),
                column=name,
                column_index=index,
                dtype=data_type,
            )
            for index, (name, data_type) in enumerate(columns)
        ]

    @staticmethod
    def find_table_information_separator(rows: list[dict]) -> int:
        """How many of `describe extended`'s rows are columns: up to the first empty row
        or section heading (`# Partition Information`, no type). Upstream stops at any
        name starting with `#`, so a column `#events` and every column after it were
        missing.

        Example:
            >>> rows = [("id", "int"), ("#events", "int"), ("# Partition Information", "")]
            >>> DynamicSparkAdapter.find_table_information_separator(
            ...     [{"col_name": name, "data_type": kind} for name, kind in rows]
            ... )
            2
        """
        for position, row in enumerate(rows):
            if is_heading(row["col_name"], row["data_type"]):
                return position
        return len(rows)

    @classmethod
    def get_adapter_run_info(cls, config: Any) -> AdapterTrackingRelationInfo:
        # The base class derives the module name from the class name
        # ("dynamicspark"); ours is the adapter type.
        return AdapterTrackingRelationInfo(
            adapter_name=cls.type(),
            base_adapter_version=import_module("dbt.adapters.__about__").version,
            adapter_version=import_module(f"dbt.adapters.{cls.type()}.__version__").version,
            model_adapter_details=cls._get_adapter_specific_run_info(config),
        )

    def quote(self, identifier: str) -> str:
        """`adapter.quote` in macros: backquotes inside a name doubled, as every identifier
        we build is (dbt-spark's wraps the name as it is, so a column named with one broke
        the SQL of `table_checksums`, `pivot` and snapshots)."""
        return quoted_identifier(str(identifier))  # dbt quotes a None database too

    def generate_python_submission_response(self, submission_result: Any) -> AdapterResponse:
        return AdapterResponse(_message="OK", code="OK")

    @available
    def swap_in_table(self, staging: Any, target: Any, existing: Any) -> None:
        """Replace `existing` (or nothing) at `target` by the built `staging` table.

        catalog.swap_in does it, for every caller: two renames, the live name
        missing only between them, the old table put back if the second fails.
        """
        from dynamic_ddl.catalog import swap_in

        if existing is not None and existing.is_view:
            self.drop_relation(existing)
        swap_in(self._fetch_rows, _table_name(staging), _table_name(target))
        if existing is not None and not existing.is_view:
            self.cache_dropped(existing)
        self.cache_renamed(staging, target)

    @available
    def string_literal(self, value: str) -> str:
        """`value` as a Spark SQL string literal (sql_text.py: escaping lives there only)."""
        from dynamic_ddl.sql_text import string_literal

        return string_literal(str(value))

    @available
    def event_timestamp_sql(
        self, expression: str, formats: str | list[str | None] | None = None
    ) -> str:
        """SQL reading an event time in any format the raw layer reads (schema/event_time.py),
        the topic's declared `formats` first."""
        from dynamic_ddl.schema.event_time import event_timestamp_sql

        return event_timestamp_sql(expression, formats)

    @available
    def raw_overridable_settings(self) -> list[str]:
        """The topic settings a raw model's own `meta` overrides (ingest/raw_models.py)."""
        from dynamic_ddl.ingest.raw_models import OVERRIDABLE

        return list(OVERRIDABLE)

    @available
    def create_bookkeeping_tables(self, schema: str) -> None:
        """Create the raw layer's ledger, registry and quarantine in `schema` if missing
        (the ledger not while a killed migration holds it: see unlocked_bookkeeping_ddl)."""
        from dynamic_ddl.ingest.bookkeeping import BookkeepingTables, unlocked_bookkeeping_ddl

        tables = BookkeepingTables.in_schema(schema)
        for statement in unlocked_bookkeeping_ddl(self._fetch_rows, tables):
            self.execute(statement)

    @available
    def original_line(
        self, schema: str, source_file: str, line_number: int, batch_id: str | None = None
    ) -> str:
        """The original text of a raw row's line, read from the inbox (ingest/lineage.py).

        The file is checked first against the checksum the ledger of `schema`
        recorded when the row's batch read it; a file changed or removed since
        is an error that says so, unless the ledger followed it to the file it was
        renamed or rotated to, which is read instead.
        """
        from dynamic_ddl.ingest.lineage import LineageError, original_line_in_ledger

        try:
            line = original_line_in_ledger(
                self._fetch_rows, schema, source_file, int(line_number), batch_id
            )
        except LineageError as error:
            raise DbtRuntimeError(str(error)) from None
        return line.decode("utf-8", errors="replace")

    def _fetch_rows(self, statement: str) -> list[tuple]:
        """Run one statement on the model's connection; its rows as plain Python values.

        The cursor directly, not `execute(fetch=True)`: agate would turn text
        such as '01' into numbers.
        """
        _, cursor = self.connections.add_query(statement, auto_begin=False)
        if not cursor.description:
            return []
        return [tuple(row) for row in cursor.fetchall()]

    @available
    def upsert_into(self, source: Any, target: Any, options: dict[str, Any]) -> dict[str, Any]:
        """The `upsert` strategy: merge `source`'s rows into `target` (copy-on-write).

        `options` holds unique_key, ordering_field, partition_by, delete_marker
        and on_schema_change from the model's config.
        """
        from dynamic_ddl.upsert.protocol import UpsertError, upsert
        from dynamic_ddl.upsert.tables import built_with

        notes = _notes_of_this_command(_table_name(target))
        _ROWS_BUILT_WITH.pop(_table_name(target), None)
        spec = replace(upsert_spec(target, options), built_with=built_with(notes))
        recomputed = _RECOMPUTED_DAYS.pop(_table_name(target), ())
        try:
            result = upsert(
                self._fetch_rows, spec, str(source), recomputed=_day_paths(spec, recomputed)
            )
        except UpsertError as error:
            raise CompilationError(str(error)) from None
        return {
            "commit_id": result.commit_id,
            "changed_partitions": result.changed_partitions,
            "affected_partitions": result.affected_partitions,
        }

    @available
    def note_rows_built_with(
        self, this: Any, what: str, settings: dict[str, Any], ordered: list[str] | None = None
    ) -> str:
        """Note, while a model renders, the settings that shape the rows it lands (`what`:
        the macro, such as `pivot_key_values`; `ordered`: the settings whose lists are in
        an order that matters). The model's upsert commit records its notes on the table,
        and refuses a later run whose notes differ, naming --full-refresh
        (upsert/tables.py, refuse_recorded_changes). Renders nothing."""
        from dynamic_ddl.upsert.tables import build_note

        if this is not None and getattr(this, "identifier", None):
            table = _table_name(this)
            notes = _notes_of_this_command(table)
            _ROWS_BUILT_WITH[table] = (get_invocation_id(), notes)
            notes.add(build_note(what, settings, set(ordered or ())))
        return ""

    @available
    def check_upsert_source(self, source: Any, target: Any, options: dict[str, Any]) -> None:
        """Raise, naming the fix, when upsert_into would refuse the model's config or the
        columns of its rows in `source`; changes nothing."""
        from dynamic_ddl.catalog import table_columns
        from dynamic_ddl.upsert.spec import UpsertError
        from dynamic_ddl.upsert.tables import refuse_missing_columns

        spec = upsert_spec(target, options)
        try:
            refuse_missing_columns(spec, table_columns(self._fetch_rows, _table_name(source)))
        except UpsertError as error:
            raise CompilationError(str(error)) from None

    @available
    def snapshot_changes_sql(
        self,
        target: Any,
        staging: Any,
        names: dict[str, str],
        valid_to_current: str | None,
        added: list[Any],
    ) -> str:
        """The rows a snapshot run changes in `target` (closed and new ones), from dbt's
        staging relation, to commit as an upsert by `dbt_scd_id` (upsert/snapshots.py);
        `added` are the staged columns the target lacks, which the commit adds."""
        from dynamic_ddl.upsert.snapshots import SnapshotColumns, changes_sql, stored_columns

        columns = stored_columns(
            [(c.name, c.data_type) for c in self.get_columns_in_relation(target)]
        )
        staged = [c.name for c in self.get_columns_in_relation(staging)]
        return changes_sql(
            str(target),
            str(staging),
            columns,
            staged,
            SnapshotColumns(names["dbt_scd_id"], names["dbt_updated_at"], names["dbt_valid_to"]),
            valid_to_current,
            [(c.name, c.data_type) for c in added],
        )

    @available
    def table_layout(self, relation: Any) -> dict[str, int]:
        """A table's rows, data files and partitions, for the run summary (catalog.py)."""
        from dynamic_ddl.catalog import table_layout

        return table_layout(self._fetch_rows, _table_name(relation))

    @available
    def rollback_upsert(self, target: Any) -> str:
        """Restore the partitions the target's last commit changed; the commit's id."""
        from dynamic_ddl.upsert.protocol import UpsertError, rollback_last_commit

        with self._operation_lock():
            try:
                return rollback_last_commit(self._fetch_rows, self._existing_upsert(target))
            except UpsertError as error:
                raise CompilationError(str(error)) from None

    @available
    def upsert_as_of(self, relation: Any, at: str) -> str:
        """A subquery of an upsert table's rows right after the kept commit `at` names (a
        commit id, or a UTC time: the commit the table showed then; upsert/history.py)."""
        from dynamic_ddl.upsert.history import as_of_sql
        from dynamic_ddl.upsert.spec import UpsertError

        try:
            return as_of_sql(self._fetch_rows, self._existing_upsert(relation), str(at))
        except UpsertError as error:
            raise CompilationError(str(error)) from None

    @available
    def rollback_upsert_to(self, relation: Any, at: str) -> str | None:
        """Restore an upsert table as it was right after the kept commit `at` names, by a
        new commit; its id (None: the table is so already)."""
        from dynamic_ddl.upsert.history import rollback_to
        from dynamic_ddl.upsert.spec import UpsertError

        with self._operation_lock():
            try:
                return rollback_to(self._fetch_rows, self._existing_upsert(relation), str(at))
            except UpsertError as error:
                raise CompilationError(str(error)) from None

    @available
    def upsert_savepoint(self, relation: Any, at: str, release: bool = False) -> str:
        """Pin the kept commit `at` names (or, with `release`, unpin it); its id."""
        from dynamic_ddl.upsert.history import release_savepoint, savepoint
        from dynamic_ddl.upsert.spec import UpsertError

        with self._operation_lock():
            operation = release_savepoint if release else savepoint
            try:
                return operation(self._fetch_rows, self._existing_upsert(relation), str(at))
            except UpsertError as error:
                raise CompilationError(str(error)) from None

    @available
    def vacuum_upsert(self, relation: Any, options: dict[str, Any]) -> dict[str, Any]:
        """Drop an upsert table's versions its retention (the model's keep_commits and
        keep_days in `options`) does not keep, orphans of killed writes included
        (upsert/care.py); what was removed."""
        from dataclasses import asdict

        from dynamic_ddl.upsert.care import vacuum
        from dynamic_ddl.upsert.spec import UpsertError

        with self._operation_lock():
            keep = options.get("keep_commits")
            try:
                spec = replace(
                    self._existing_upsert(relation),
                    keep_commits=1 if keep is None else keep,
                    keep_days=options.get("keep_days"),
                )
                spec.validate_retention()
                return asdict(vacuum(self._fetch_rows, spec))
            except UpsertError as error:
                raise CompilationError(str(error)) from None

    @available
    def compact_raw(self, relation: Any, options: dict[str, Any]) -> list[str]:
        """Compact a raw model's table and its child tables (ingest/compaction.py), by
        the `compact_after_days` and `compact_target_mb` in `options`, under the topic's
        lock; a line per table saying what it did."""
        from dynamic_ddl.ingest.compaction import CompactionError, CompactionPolicy, compact_topic
        from dynamic_ddl.ingest.topics import ConfigError
        from dynamic_ddl.locks import LockSettings

        with self._operation_lock():
            table = f"{relation.schema}.{relation.identifier}"
            try:
                policy = CompactionPolicy.from_config(options, f"compact of {relation.identifier}")
                results = compact_topic(
                    self._fetch_rows,
                    table,
                    policy.after_days,
                    policy.target_mb,
                    LockSettings.from_env(options.get("lock_wait_seconds")),
                )
            except (CompactionError, ConfigError) as error:
                raise CompilationError(str(error)) from None
            return [result.message() for result in results]

    @available
    def repartition_upsert(
        self,
        relation: Any,
        partition_by: Any,
        tombstone_days: int | None = None,
        unique_key: Any = None,
        global_key: bool = False,
    ) -> str | None:
        """Rewrite an upsert table under new partition columns and swap it in
        (upsert/care.py), with the remembered deletes its model's tombstone_days
        keeps, its rows checked by the model's key; the id of its new version, None
        when it is so already."""

        from dynamic_ddl.upsert.care import repartition
        from dynamic_ddl.upsert.spec import DEFAULT_TOMBSTONE_DAYS, UpsertError

        with self._operation_lock():
            days = DEFAULT_TOMBSTONE_DAYS if tombstone_days is None else tombstone_days
            try:
                spec = replace(
                    self._existing_upsert(relation),
                    tombstone_days=days,
                    unique_key=_columns(unique_key, "unique_key"),
                    global_key=_flag("global_key", global_key),
                )
                spec.validate_tombstone_days()  # a negative one forgot every delete
                return repartition(self._fetch_rows, spec, _columns(partition_by))
            except UpsertError as error:
                raise CompilationError(str(error)) from None

    @available
    def last_commit_id(self, relation: Any) -> str | None:
        """The newest commit of an upsert table whose rows are all visible, if any."""
        from dynamic_ddl.upsert.commit_log import last_commit_id

        return last_commit_id(self._fetch_rows, self._existing_upsert(relation))

    @available
    def has_pii_salt(self) -> bool:
        """Whether this target's sessions hold the personal-data salt (dynamic_ddl/pii.py)."""
        return self.config.credentials.pii_salt() is not None

    @available
    def hold_run_lock(self, schema: str) -> str:
        """Take this dbt run's lock on `schema` (locks.RunLock) until release_run_lock,
        waiting for another run that holds it; who holds it now, as a person reads it."""
        lock = self._take_run_lock(schema)
        _RUN_LOCKS[schema] = lock
        self._list_cached_schemas_again()
        return lock.holder.describe()

    def _take_run_lock(self, schema: str) -> Any:
        """The run lock on `schema` (locks.RunLock), taken, waiting for its holder; a
        dbt error naming the holder when the wait ends."""
        from dynamic_ddl.locks import LockSettings, LockTimeout, NotALock, RunLock

        lock = RunLock(schema, LockSettings.from_env(), self._with_own_connection)
        try:
            lock.acquire(self._fetch_rows, waiting=_LOGGER.info)
        except (LockTimeout, NotALock) as error:
            raise DbtRuntimeError(str(error)) from None
        return lock

    def _give_back_run_lock(self, schema: str, lock: Any) -> None:
        """Release a run lock this process took, saying if its lease went unrenewed."""
        lock.release(self._fetch_rows)
        if lock.lost is not None:
            _LOGGER.warning(f"The run lock on {schema} was not renewed: {lock.lost}")

    def list_relations_without_caching(self, schema_relation: Any) -> list[Any]:
        """The schema's relations, once a table a killed repartition hid is back (when
        this command builds models: dbt lists a schema before any model renders, and
        took a hidden table for a missing one, building its model as new)."""
        if schema_relation.schema and getattr(get_flags(), "WHICH", None) in BUILDING:
            self._mend_hidden_tables(schema_relation.schema)
        return super().list_relations_without_caching(schema_relation)

    def _mend_hidden_tables(self, schema: str) -> None:
        """care.mend_hidden_table for each table a killed repartition hid, without waiting
        for a lock another process holds (its holder, or the model's commit, mends it);
        a table that cannot be mended is named in a warning, and the listing goes on."""
        from dynamic_ddl.locks import LockSettings
        from dynamic_ddl.upsert.care import hidden_by_repartitions, mend_hidden_table

        for spec in hidden_by_repartitions(self._fetch_rows, schema):
            try:
                done = mend_hidden_table(self._fetch_rows, spec, LockSettings(wait_seconds=0))
            except Exception as error:
                _LOGGER.warning(
                    f"{spec.target} is hidden by a repartition killed between its two renames"
                    f" and was left so ({str(error).splitlines()[0]}); its model's next commit"
                    " puts it back."
                )
                continue
            if done is not None:
                _LOGGER.warning(f"{spec.target}: {MENDED[done]}")

    def _list_cached_schemas_again(self) -> None:
        """Replace dbt's relation cache, filled before this run held its lock: another run
        may have built or dropped tables since (and a listing taken while it worked can
        come back empty), so a model would take an existing table for a missing one."""
        with self.cache.lock:
            schemas = set(self.cache.schemas)
            self.cache.clear()
        for database, schema in schemas:
            listed = self.list_relations_without_caching(
                self.Relation.create(database=database, schema=schema)
            )
            self.cache.add_schema(database, schema)
            for relation in listed:
                self.cache.add(relation)

    @available
    def release_run_lock(self, schema: str) -> None:
        """Release this run's lock on `schema`, if it holds it."""
        lock = _RUN_LOCKS.pop(schema, None)
        if lock is not None:
            self._give_back_run_lock(schema, lock)

    @contextmanager
    def _operation_lock(self) -> Iterator[None]:
        """Hold the target schema's run lock for an operation that changes a table's
        history (rollback, restore, savepoint, retention, compaction, repartition),
        unless this process holds it already (a run's hook). A dbt run reads a table's
        state when it renders a model (`unseen_batches`, `changed_since`), before the
        model's commit takes the table's lock: a rollback in between was undone by that
        commit, and its batches never read again (found by review). So such operations
        wait for a run to end, and a run started meanwhile waits for them."""
        schema = self.config.credentials.schema
        held = _RUN_LOCKS.get(schema)
        if held is not None and held.holder is not None and held.lost is None:
            yield
            return
        lock = self._take_run_lock(schema)
        try:
            yield
        finally:
            self._give_back_run_lock(schema, lock)

    def _with_own_connection(self, work: Any) -> None:
        """Call `work` with a Sql on a connection of the calling thread (the lock's
        renewal thread has none of dbt's)."""
        with self.connection_named("dynamic_ddl_run_lock"):
            work(self._fetch_rows)

    @available
    def unseen_batches_filter(self, column: str, this: Any, source: Any) -> str:
        """The filter for raw batches `this` has not taken (landing/batches.py); `this`
        None on a full build, `source` the raw or child table read, if known."""
        from dynamic_ddl.landing.batches import unseen_batches_filter

        return unseen_batches_filter(
            self._fetch_rows,
            column,
            _table_name(this) if this is not None else None,
            _table_name(source) if getattr(source, "schema", None) else None,  # not a CTE
        )

    @available
    def refuse_a_hidden_table(self, relation: Any) -> str:
        """Raise, naming the model to run, when `relation` is hidden by a run killed
        between a swap's two renames (landing/batches.py); '' otherwise."""
        from dynamic_ddl.landing.batches import refuse_a_hidden_table

        refuse_a_hidden_table(self._fetch_rows, _table_name(relation))
        return ""

    @available
    def listed_values_filter(self, column: str, query: str, qualifier: str = "") -> str:
        """A filter keeping rows whose `column` (prefixed with `qualifier`) holds one of the
        values in the first column of `query`'s rows, listed as literals so that Spark
        reads only those partitions; `false` when it returns none."""
        from dynamic_ddl.sql_text import rows_predicate

        return rows_predicate([column], [row[:1] for row in self._fetch_rows(query)], qualifier)

    @available
    def unseen_batch_filters(
        self, column: str, this: Any, source: Any, day_column: str | None = None
    ) -> dict[str, str]:
        """The `unseen`, `committed` and (with `day_column`) `days` filters on `source`'s
        rows, from one reading of its ledger (landing/batches.py)."""
        from dynamic_ddl.landing.batches import unseen_batch_filters

        return unseen_batch_filters(
            self._fetch_rows,
            column,
            _table_name(this) if this is not None else None,
            _table_name(source) if getattr(source, "schema", None) else None,
            day_column,
        )

    @available
    def changed_since_filter(self, relation: Any, this: Any, column: str) -> str:
        """The filter on an upsert table's rows changed since `this` (None on a full build)
        stored the newest `column` (upsert/increments.py)."""
        from dynamic_ddl.upsert.increments import changed_since_filter, greatest_value
        from dynamic_ddl.upsert.spec import UpsertSpec

        seen = None
        if this is not None:
            seen = greatest_value(self._fetch_rows, UpsertSpec(_table_name(this)), column)
        upstream = self._existing_upsert(relation)
        return changed_since_filter(self._fetch_rows, upstream, str(relation), seen)

    @available
    def changed_days_filter(
        self,
        relation: Any,
        this: Any,
        incremental: bool,
        qualifier: str,
        day_column: str,
        commit_column: str,
        partition_column: str | None = None,
    ) -> str:
        """The filter on an upsert table's rows (prefixed with `qualifier`) of the days whose
        partitions changed since `this` stored the newest `commit_column` (every row
        when not `incremental`); the days as literals, so Spark reads only them.

        A day whose every row moved away or was deleted is among them. The
        `replace_partitions` strategy replaces each of these days in `this`,
        emptied ones too (see upsert_into).
        """
        from dynamic_ddl.catalog import table_columns
        from dynamic_ddl.sql_text import rows_predicate
        from dynamic_ddl.upsert.increments import (
            changed_days,
            committed_rows_predicate,
            finished_commits,
            greatest_value,
        )
        from dynamic_ddl.upsert.spec import UpsertSpec

        _RECOMPUTED_DAYS.pop(_table_name(this), None)
        found = self.get_relation(relation.database, relation.schema, relation.identifier)
        if not incremental and found is None:
            return "true"  # nothing built yet: `dbt compile` on an empty warehouse
        upstream = self._existing_upsert(relation)
        try:  # this model stores the newest commit it read: never one half written
            state = finished_commits(self._fetch_rows, upstream, f"{this}")
        except ValueError as error:
            raise CompilationError(str(error)) from None
        committed = committed_rows_predicate(state, qualifier)
        if not incremental:
            return committed
        stored = {name.lower() for name, _ in table_columns(self._fetch_rows, _table_name(this))}
        if commit_column.lower() not in stored:
            raise CompilationError(
                f"{this} has no column {commit_column}, where this model keeps the upstream"
                " commit it saw last: it was built another way before (e.g. as a table)."
                f" Rebuild it once: dbt run --full-refresh -s {this.identifier}"
            )
        seen = greatest_value(self._fetch_rows, UpsertSpec(_table_name(this)), commit_column)
        try:
            days = changed_days(self._fetch_rows, upstream, day_column, seen, state)
        except ValueError as error:
            raise CompilationError(str(error)) from None
        _RECOMPUTED_DAYS[_table_name(this)] = (partition_column or day_column, days)
        listed = rows_predicate([day_column], [(day,) for day in days], qualifier)
        return f"({listed} and {committed})"

    @available
    def refuse_rebuild_over_savepoints(self, target: Any) -> None:
        """Fail a --full-refresh of an upsert table (before it builds anything) while a
        savepoint pins some of the history the rebuild would drop."""
        from dynamic_ddl.catalog import table_exists
        from dynamic_ddl.upsert.commit_log import read_log
        from dynamic_ddl.upsert.protocol import UpsertError, refuse_dropping_savepoints

        spec = self._existing_upsert(target)
        if not table_exists(self._fetch_rows, spec.log):
            return
        state = read_log(self._fetch_rows, spec)
        try:
            refuse_dropping_savepoints(state, spec.target, "a --full-refresh")
        except UpsertError as error:
            raise CompilationError(str(error)) from None

    @available
    def clear_staging_folder(self, relation: Any) -> None:
        """Remove what a killed write left in the default folder of a staging table
        (`<name>__dbt_new`, `<name>__dbt_tmp`) that no longer exists: Spark refuses to
        create a managed table over a folder that is not empty, so every later run of
        the model failed (found by review). Only on a local disk; only those names."""
        import shutil

        from dynamic_ddl.catalog import database_location, local_path, table_exists

        name = str(relation.identifier)
        if not name.endswith(STAGING_SUFFIXES):
            return
        table = f"{relation.schema}.{name}"
        if table_exists(self._fetch_rows, table):
            return
        folder = local_path(database_location(self._fetch_rows, str(relation.schema)))
        if folder is not None and (folder / name.lower()).is_dir():
            shutil.rmtree(folder / name.lower(), ignore_errors=True)

    @available
    def drop_upsert_table(self, target: Any) -> None:
        """Drop an upsert table with its version store and its commit log (a full refresh)."""
        from dynamic_ddl.upsert.protocol import drop_upsert_table

        drop_upsert_table(self._fetch_rows, self._existing_upsert(target))

    def get_filtered_catalog(
        self, relation_configs: Iterable[Any], used_schemas: Any, relations: Any = None
    ) -> tuple[Any, list[Exception]]:
        """dbt-spark's catalog; then discovered columns get their docs from the registry.

        The nodes here are the manifest's own, and `dbt docs generate` writes the
        manifest after the catalog: a description set now reaches the docs site.
        """
        nodes = list(relation_configs)  # dbt passes a one-pass iterator
        catalog, exceptions = super().get_filtered_catalog(nodes, used_schemas, relations)
        schemas = {row["table_schema"] for row in catalog if row["table_name"] == REGISTRY_TABLE}
        columns: dict[tuple[str, str], list[str]] = {}
        for row in catalog:
            table = ((row["table_schema"] or "").lower(), row["table_name"].lower())
            columns.setdefault(table, []).append(row["column_name"])
        for schema in sorted(schemas):
            try:
                self._document_discovered_columns(nodes, schema, columns)
            except Exception as error:  # docs still build; dbt reports it with the catalog's
                exceptions.append(error)
        self._document_columns_by_pattern(nodes, catalog)
        return catalog, exceptions

    def _document_columns_by_pattern(self, nodes: list[Any], catalog: Any) -> None:
        """Describe undocumented warehouse columns of models whose YAML gives a sentence
        for them (meta `discovered_columns`, e.g. a pivot's key columns)."""
        types: dict[tuple[str, str], dict[str, str]] = {}
        for row in catalog:
            table = ((row["table_schema"] or "").lower(), row["table_name"].lower())
            types.setdefault(table, {})[row["column_name"]] = row["column_type"]
        for node in nodes:
            pattern = (getattr(node.config, "meta", None) or {}).get(PATTERN_META_KEY)
            if not pattern:
                continue
            relation = self.Relation.create_from(self.config, node)
            table = ((relation.schema or "").lower(), (relation.identifier or "").lower())
            documented = {name: info.description for name, info in node.columns.items()}
            added = descriptions_from_pattern(pattern, documented, types.get(table, {}))
            _set_descriptions(node, added)

    def _document_discovered_columns(
        self, nodes: list[Any], schema: str, columns: dict[tuple[str, str], list[str]]
    ) -> None:
        """Describe the undocumented columns of `schema`'s nodes from its registry (and
        the text companions among their `columns` in the catalog)."""
        by_table: dict[str, list[DiscoveredColumn]] = {}
        registry = f"{schema}.{REGISTRY_TABLE}"  # raw models may be rewriting it
        for row in read_settled(self._fetch_rows, registry, registry_query(schema)):
            column = DiscoveredColumn(*(str(value) for value in row))
            by_table.setdefault(column.table_name.lower(), []).append(column)
        for node in nodes:
            relation = self.Relation.create_from(self.config, node)
            if (relation.schema or "").lower() != schema.lower():
                continue
            identifier = (relation.identifier or "").lower()
            discovered = by_table.get(identifier, [])
            documented = {name: info.description for name, info in node.columns.items()}
            in_warehouse = columns.get((schema.lower(), identifier), [])
            _set_descriptions(node, descriptions_to_add(documented, discovered, in_warehouse))

    def _existing_upsert(self, relation: Any) -> Any:
        from dynamic_ddl.upsert.spec import UpsertSpec

        return UpsertSpec.of_table(self._fetch_rows, f"{relation.schema}.{relation.identifier}")


_LOGGER = AdapterLogger("dynamic_spark")
STAGING_SUFFIXES = ("__dbt_new", "__dbt_tmp")  # what materializations build before a swap
_RUN_LOCKS: dict[str, Any] = {}  # schema -> the RunLock this process holds on it
# A model's table -> (day column, the days rows_of_changed_days listed when the model was
# rendered), taken by its replace_partitions commit, which runs right after in this process.
_RECOMPUTED_DAYS: dict[str, tuple[str, list[Any]]] = {}
# A model's table -> the dbt invocation, and what its rendering in it noted of how the
# model builds rows (note_rows_built_with), taken by its upsert commit, which runs right
# after in this process.
_ROWS_BUILT_WITH: dict[str, tuple[str, set[str]]] = {}


def _notes_of_this_command(table: str) -> set[str]:
    """The notes `table`'s model made in this dbt command: an earlier command's in this
    process (a `dbt compile`, a run that failed before its commit) are not its own."""
    invocation, notes = _ROWS_BUILT_WITH.get(table, ("", set()))
    return notes if invocation == get_invocation_id() else set()


def _day_paths(spec: Any, recomputed: tuple) -> list[str]:
    """The partition paths of the recomputed days of a `replace_partitions` model, which
    must be partitioned by its day alone: a partition holding other days (a month) would
    be replaced by the changed days' rows, the others' lost, and a partition of one day
    and more (day, country) left stale when its group lost every row (found by review)."""
    from dynamic_ddl.sql_text import partition_path

    if not recomputed or not spec.replace:
        return []
    day_column, days = recomputed
    if [c.lower() for c in spec.partition_by] != [day_column.lower()]:
        raise CompilationError(
            f"{spec.target} reads rows_of_changed_days, which gives whole days of"
            f" {day_column}, and replace_partitions replaces whole partitions: with"
            f" partition_by={list(spec.partition_by)} the rows of days it did not recompute"
            f" would be lost. Set partition_by=['{day_column}'] (then `dbt run-operation"
            " repartition` or --full-refresh), pass rows_of_changed_days the model's own"
            " name of the day (partition_column=...), or recompute what each partition holds."
        )
    return [partition_path(spec.partition_by, [day]) for day in days]


def _described_name(relation: Any) -> str:
    """A relation as dbt's `describe` names it: a temporary view, rendered without its
    schema (`__dbt_tmp`), by its name alone (found by review: named in the schema, it
    was not found, and dbt took that for a relation with no column)."""
    if relation.schema and relation.include_policy.schema:
        return _table_name(relation)
    return relation.identifier


def _table_name(relation: Any) -> str:
    """`schema.identifier` of a relation, as catalog.py takes it."""
    return f"{relation.schema}.{relation.identifier}"


def _set_descriptions(node: Any, descriptions: dict[str, str]) -> None:
    """Set column descriptions on a manifest node, adding the columns YAML lacks."""
    for name, description in descriptions.items():
        existing = next((c for c in node.columns if c.lower() == name.lower()), name)
        if existing in node.columns:
            node.columns[existing].description = description
        else:
            node.columns[name] = ColumnInfo(name=name, description=description)


def _columns(value: Any, name: str = "partition_by") -> tuple[str, ...]:
    """A config value naming one column (or predicate) or a list of them, as a tuple;
    anything else an UpsertError naming `name` (found by review: `partition_by: 5`
    ended in a Python TypeError).

    Example:
        >>> _columns("day"), _columns(["day", "country"]), _columns(None)
        (('day',), ('day', 'country'), ())
        >>> from dynamic_ddl.upsert.spec import UpsertError
        >>> try:
        ...     _columns([5])
        ... except UpsertError as error:
        ...     print(error)
        partition_by must name a column or a list of columns, not [5].
    """
    from dynamic_ddl.upsert.spec import UpsertError

    if not value:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise UpsertError(f"{name} must name a column or a list of columns, not {value!r}.")


def _flag(name: str, value: Any) -> bool:
    """A yes/no config value: a boolean, or its text (`'false'` is no, not a non-empty
    string read as yes); else an UpsertError naming it.

    Example:
        >>> _flag("global_key", "False"), _flag("global_key", None), _flag("global_key", True)
        (False, False, True)
    """
    from dynamic_ddl.upsert.spec import UpsertError

    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise UpsertError(f"{name} must be true or false, not {value!r}.")


def upsert_spec(target: Any, options: dict[str, Any]) -> Any:
    """An UpsertSpec from a relation and the model's config values; bad config is a
    compilation error naming the fix."""
    from dynamic_ddl.upsert.spec import DEFAULT_TOMBSTONE_DAYS, UpsertError, UpsertSpec

    days = options.get("tombstone_days")
    try:
        spec = UpsertSpec(
            target=f"{target.schema}.{target.identifier}",
            unique_key=_columns(options.get("unique_key"), "unique_key"),
            ordering_field=options.get("ordering_field") or "",
            tie_break=_columns(options.get("tie_break"), "tie_break"),
            partition_by=_columns(options.get("partition_by")),
            delete_marker=options.get("delete_marker"),
            on_schema_change=options.get("on_schema_change") or "ignore",
            predicates=_columns(options.get("incremental_predicates"), "incremental_predicates"),
            replace=options.get("strategy") == "replace_partitions",
            partial_updates=_flag("partial_updates", options.get("partial_updates")),
            tombstone_days=DEFAULT_TOMBSTONE_DAYS if days is None else days,
            global_key=_flag("global_key", options.get("global_key")),
            keep_commits=1 if options.get("keep_commits") is None else options["keep_commits"],
            keep_days=options.get("keep_days"),
            model_name=options.get("model_name") or "",
        )
        spec.validate()
        return spec
    except UpsertError as error:
        raise CompilationError(str(error)) from None
