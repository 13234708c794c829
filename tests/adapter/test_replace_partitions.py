"""The `replace_partitions` strategy through dbt: a recomputed day replaces that day's
rows whole, so a correction that moves an event between groups leaves no stale count
and a group that vanished is gone; untouched days keep their files; rollback and
`changed_since` work as for upserts (issue 21, finding 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from dbt.tests.util import run_dbt

from tests.adapter.targets import session_profile

PROJECT = Path(__file__).resolve().parents[2]

# The days to recompute come from a var here; the project's facts use rows_of_changed_days.
DAILY = """
{{ config(materialized='incremental', incremental_strategy='replace_partitions',
          partition_by=['day']) }}
select day, firmware, count(*) as events
from {{ source('feed', 'events') }}
{% if is_incremental() %}where day in ({{ var('days') }}){% endif %}
group by day, firmware
"""

PULLED = """
{{ config(materialized='incremental', incremental_strategy='append') }}
select day, firmware, events, _commit_id from {{ ref('daily') }}
where {{ changed_since(ref('daily')) }}
"""

SOURCES = """
sources:
  - name: feed
    schema: "{{ target.schema }}"
    tables:
      - name: events
"""


class TestReplacePartitions:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()

    @pytest.fixture(scope="class")
    def models(self):
        return {"daily.sql": DAILY, "pulled.sql": PULLED, "sources.yml": SOURCES}

    def _daily(self, project) -> list[tuple]:
        rows = project.run_sql(
            f"select day, firmware, events from {project.test_schema}.daily order by 1, 2",
            fetch="all",
        )
        return [tuple(r) for r in rows]

    def _load(self, project, events: dict[str, tuple[str, str]]) -> None:
        """The source's rows: event id -> (day, firmware)."""
        values = ", ".join(f"('{e}', '{day}', '{fw}')" for e, (day, fw) in events.items())
        project.run_sql(f"insert overwrite table {project.test_schema}.events values {values}")

    def test_a_recomputed_day_replaces_its_rows_whole(self, project):
        schema = project.test_schema
        project.run_sql(
            f"create table {schema}.events (id string, day string, firmware string) using parquet"
        )
        events = {
            "e1": ("d1", "1.0"),
            "e2": ("d1", "1.0"),
            "e3": ("d2", "1.0"),
            "e4": ("d3", "1.0"),
        }
        self._load(project, events)
        run_dbt(["run"])
        assert self._daily(project) == [("d1", "1.0", 2), ("d2", "1.0", 1), ("d3", "1.0", 1)]
        d3_files = project.run_sql(
            f"select distinct input_file_name() from {schema}.daily where day = 'd3'", fetch="all"
        )

        # A correction moves e2 to another group of d1; e3's group of d2 vanishes.
        self._load(project, {**events, "e2": ("d1", "1.1"), "e3": ("d2", "1.1")})
        run_dbt(["run", "--vars", "{days: \"'d1', 'd2'\"}"])
        assert self._daily(project) == [
            ("d1", "1.0", 1),
            ("d1", "1.1", 1),
            ("d2", "1.1", 1),
            ("d3", "1.0", 1),
        ]
        assert d3_files == project.run_sql(
            f"select distinct input_file_name() from {schema}.daily where day = 'd3'", fetch="all"
        )
        pulled = project.run_sql(
            f"select day, firmware, events from {schema}.pulled order by 1, 2, 3", fetch="all"
        )
        assert [tuple(r) for r in pulled] == [
            ("d1", "1.0", 1),  # the replaced days, pulled again
            ("d1", "1.0", 2),
            ("d1", "1.1", 1),
            ("d2", "1.0", 1),
            ("d2", "1.1", 1),
            ("d3", "1.0", 1),
        ]

        run_dbt(["run-operation", "rollback_last_commit", "--args", "{model: daily}"])
        assert self._daily(project) == [("d1", "1.0", 2), ("d2", "1.0", 1), ("d3", "1.0", 1)]


# An upstream whose events a correction can move to another day (a global key), and a
# daily count over it, recomputed for the days rows_of_changed_days lists.
EVENTS = """
{{ config(materialized='incremental', incremental_strategy='upsert', unique_key='id',
          ordering_field='rev', partition_by=['day'], global_key=true) }}
select id, rev, firmware, day from {{ source('feed', 'events') }}
"""

DAILY_OF_CHANGED_DAYS = """
{{ config(materialized='incremental', incremental_strategy='replace_partitions',
          partition_by=['day']) }}
select firmware, count(*) as events, max(_commit_id) as _source_commit_id, day
from ({{ rows_of_changed_days(ref('placed_events'), day_column='day') }}) as changed
group by day, firmware
"""


class ChangedDaysProject:
    """The upstream `placed_events` and facts over rows_of_changed_days (FACTS: file name
    to model), on the embedded session."""

    FACTS: dict[str, str]

    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()

    @pytest.fixture(scope="class")
    def models(self):
        return {"placed_events.sql": EVENTS, **self.FACTS, "sources.yml": SOURCES}

    @pytest.fixture(scope="class")
    def macros(self):
        """The project's macro (a project macro, not the adapter's)."""
        return {
            "rows_of_changed_days.sql": (PROJECT / "macros/rows_of_changed_days.sql").read_text()
        }

    @staticmethod
    def _events(project, values: str) -> None:
        """Create the source table `events` if missing, and insert `values` (SQL rows)."""
        project.run_sql(
            f"create table if not exists {project.test_schema}.events"
            " (id string, rev int, firmware string, day string) using parquet"
        )
        project.run_sql(f"insert into {project.test_schema}.events values {values}")

    @staticmethod
    def _rows(project, table: str, columns: str) -> list[tuple]:
        rows = project.run_sql(
            f"select {columns} from {project.test_schema}.{table} order by 1, 2", fetch="all"
        )
        return [tuple(r) for r in rows]


class TestADayLeftWithoutEvents(ChangedDaysProject):
    FACTS = {"daily.sql": DAILY_OF_CHANGED_DAYS}

    def test_a_correction_that_moves_a_days_only_event_empties_that_day(self, project):
        self._events(project, "('e1', 1, '1.0', 'd1'), ('e2', 1, '1.0', 'd2')")
        run_dbt(["run"])
        assert self._rows(project, "daily", "day, firmware, events") == [
            ("d1", "1.0", 1),
            ("d2", "1.0", 1),
        ]
        # e1, d1's only event, is corrected to d2: it leaves d1, and d1's count goes.
        self._events(project, "('e1', 2, '1.0', 'd2')")
        run_dbt(["run"])
        assert self._rows(project, "placed_events", "id, day") == [("e1", "d2"), ("e2", "d2")]
        assert self._rows(project, "daily", "day, firmware, events") == [("d2", "1.0", 2)]
        # A run with nothing new changes nothing.
        run_dbt(["run"])
        assert self._rows(project, "daily", "day, firmware, events") == [("d2", "1.0", 2)]


class TestAPendingUpstreamCommit(ChangedDaysProject):
    FACTS = {"daily.sql": DAILY_OF_CHANGED_DAYS}

    def test_a_commit_left_pending_upstream_is_never_read_half(self, project, spark):
        """Found by review: a commit of the upstream killed after its partitions moved
        (before its log line) showed its rows in the days an earlier commit had changed;
        the daily count read them, stored the pending commit's id, and once the commit
        was finished its other days never counted as changed: wrong for good. The
        daily count now refuses while a commit is pending, naming the fix."""
        from dynamic_ddl import steps
        from dynamic_ddl.catalog import spark_sql
        from dynamic_ddl.upsert.protocol import upsert
        from dynamic_ddl.upsert.spec import UpsertSpec

        self._events(project, "('e1', 1, '1.0', 'd1'), ('e2', 1, '1.0', 'd2')")
        run_dbt(["run"])
        self._events(project, "('e3', 1, '1.0', 'd1')")
        run_dbt(["run", "-s", "placed_events"])  # d1 changed; the daily count not run
        # A commit of e4 (d1) and e5 (d2), killed before its log line, as a run of
        # placed_events would write it (the source holds both for the next run).
        late = "('e4', 1, '2.0', 'd1'), ('e5', 1, '2.0', 'd2')"
        self._events(project, late)
        spark.sql(
            f"create or replace temporary view late_events as select * from values {late}"
            " as t(id, rev, firmware, day)"
        )
        spec = UpsertSpec(
            f"{project.test_schema}.placed_events", ("id",), "rev", ("day",), global_key=True
        )
        with (
            pytest.raises(steps.Interrupted),
            steps.hooked(steps.interrupt_on("upsert.log_committed")),
        ):
            upsert(spark_sql(spark), spec, "late_events")

        failed = run_dbt(["run", "-s", "daily"], expect_pass=False)
        message = failed.results[0].message
        assert "has a commit under way" in message and "dbt run -s placed_events" in message
        run_dbt(["run", "-s", "placed_events"])  # finishes or undoes it, then takes e4, e5
        run_dbt(["run", "-s", "daily"])
        columns = "day, firmware, events"
        incremental = self._rows(project, "daily", columns)
        assert incremental == [
            ("d1", "1.0", 2),
            ("d1", "2.0", 1),
            ("d2", "1.0", 1),
            ("d2", "2.0", 1),
        ]
        run_dbt(["run", "-s", "daily", "--full-refresh"])
        assert self._rows(project, "daily", columns) == incremental


# Whole days recomputed into partitions of a month: the month's other days would go.
MONTHLY_OF_CHANGED_DAYS = """
{{ config(materialized='incremental', incremental_strategy='replace_partitions',
          partition_by=['month']) }}
select firmware, count(*) as events, max(_commit_id) as _source_commit_id,
    substr(day, 1, 7) as month
from ({{ rows_of_changed_days(ref('placed_events'), day_column='day') }}) as changed
group by substr(day, 1, 7), firmware
"""


# The day renamed: rows_of_changed_days is told the model's name of it.
RENAMED_DAY = """
{{ config(materialized='incremental', incremental_strategy='replace_partitions',
          partition_by=['d']) }}
select firmware, count(*) as events, max(_commit_id) as _source_commit_id, day as d
from ({{ rows_of_changed_days(ref('placed_events'), day_column='day', partition_column='d') }})
    as changed
group by day, firmware
"""


class TestChangedDaysIntoCoarserPartitions(ChangedDaysProject):
    FACTS = {"monthly.sql": MONTHLY_OF_CHANGED_DAYS, "renamed.sql": RENAMED_DAY}

    def test_are_refused_before_a_months_other_days_are_lost(self, project):
        """Found by review: each run replaced the month with the changed days' counts."""
        self._events(project, "('e1', 1, '1.0', '2026-11-01'), ('e2', 1, '1.0', '2026-11-02')")
        run_dbt(["run"])
        monthly = f"select month, events from {project.test_schema}.monthly"
        assert project.run_sql(monthly, fetch="all") == [("2026-11", 2)]
        self._events(project, "('e3', 1, '1.0', '2026-11-02'), ('e4', 1, '1.0', '2026-11-02')")
        # Unrefused, the month held 3 (the changed day's events), not 4.
        results = run_dbt(["run"], expect_pass=False)
        (refused,) = [r for r in results.results if r.node.name == "monthly"]
        assert "Set partition_by=['day']" in refused.message
        assert project.run_sql(monthly, fetch="all") == [("2026-11", 2)]
        # Partitioned by the day under another name, and told so: recomputed.
        renamed = f"select d, events from {project.test_schema}.renamed order by d"
        assert project.run_sql(renamed, fetch="all") == [("2026-11-01", 1), ("2026-11-02", 3)]
