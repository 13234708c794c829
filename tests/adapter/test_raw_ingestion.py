"""Raw ingestion through a real `dbt build`: hostile input, drift, quarantine, nothing lost.

The test project holds one raw model (the project's own stub, as raw_hostile),
the project's source declarations and its invariant test, and reads an inbox
the test writes: a hostile first batch, then a drifting second batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from dbt.tests.util import run_dbt, run_dbt_and_capture

from tests.adapter.targets import session_profile
from tests.conftest import PROJECT_ROOT
from tests.test_schema_modes import ROUTED_BATCH_1, ROUTED_BATCH_2, ROUTED_MODES

LONG = "z" * 5000
BATCH_1 = [
    json.dumps(
        {
            "id": 1,
            "ts": "2026-11-01T10:00:00Z",
            "Name": "Upper",
            "name": "lower",
            "a.b": 1,
            "a": {"b": 2},
            "first name": "spaced",
            "first_name": "snake",
            "sel;ect--": "s",
            "emoji 📷": "cam",
            "quote's": "q",
            "both'\"": "b",
            "always_null": None,
            "empty": {},
            "tags": ["x", "y"],
            "long": LONG,
            "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}],
            "n": {"deep": True},
        },
        ensure_ascii=False,
    ).replace('"long"', '"big": 123456789012345678901234567890, "long"'),
    json.dumps({"id": 2, "ts": "2026-11-02T23:59:59Z", "big": 5, "items": []}),
    "[1, 2]",
    '{"broken": ',
    '{"d": {"d": {"d": {"d": {"d": {"d": {"d": 1}}}}}}}',
    None,  # invalid UTF-8, written as bytes below
    "",
    json.dumps({"id": 9, "pad": "p" * 30000}),
    json.dumps({"id": 10, "ts": "at tea time"}),  # kept; the readable_event_times test warns
]
INVALID_UTF8 = b'{"id": 7, "name": "caf\xff"}'
BATCH_2 = [
    json.dumps(
        {
            "id": "x-3",
            "ts": "2026-11-03T08:00:00Z",
            "big": 1.5,
            "n": {"deep": False, "new1": 1},
            "new2": "v",
            "new3": 3,
            "new4": 4,
            "items": [{"sku": "c", "qty": 2.5, "color": "red"}],
        }
    )
]
CAP = 18  # batch 1 has 16 leaves: batch 2's four new ones get two columns, two overflow


def _write_batch(folder: Path, lines: list[str | None]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    payload = b"\n".join(INVALID_UTF8 if line is None else line.encode() for line in lines)
    (folder / "part-0.json").write_bytes(payload + b"\n")
    return folder / "part-0.json"


def _project_sources() -> dict:
    """The project's source declarations, and the event-time warning on raw_hostile."""
    raw_yml = yaml.safe_load((PROJECT_ROOT / "python_models/raw/_raw.yml").read_text())
    event_times = {
        "readable_event_times": {
            "arguments": {"event_time_column": "ts"},
            "config": {"severity": "warn"},
        }
    }
    models = [{"name": "raw_hostile", "data_tests": [event_times]}]
    return {"version": 2, "sources": raw_yml["sources"], "models": models}


class TestRawIngestion:
    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()

    @pytest.fixture(scope="class")
    def inbox(self, tmp_path_factory):
        return tmp_path_factory.mktemp("inbox")

    @pytest.fixture(scope="class")
    def project_config_update(self, inbox):
        return {
            "vars": {
                "inbox_dir": str(inbox),
                "raw_topics": {"hostile": {"record_key": ["id"], "event_time": "ts"}},
                "raw_limits": {"max_line_bytes": 20000, "max_depth": 6, "max_columns": CAP},
            },
            "on-run-start": ["{{ create_ingestion_tables() }}"],
        }

    @pytest.fixture(scope="class")
    def models(self):
        stub = (PROJECT_ROOT / "python_models/raw/raw_device_events.py").read_text()
        return {"raw_hostile.py": stub, "_raw.yml": yaml.safe_dump(_project_sources())}

    @pytest.fixture(scope="class")
    def tests(self):
        invariant = PROJECT_ROOT / "tests/data_tests/assert_every_input_line_is_accounted_for.sql"
        return {invariant.name: invariant.read_text()}

    @pytest.fixture(scope="class")
    def macros(self):
        needed = ("readable_event_times.sql", "column_or_null.sql")
        return {name: (PROJECT_ROOT / "macros" / name).read_text() for name in needed}

    def _rows(self, project, sql):
        return [tuple(row) for row in project.run_sql(sql, fetch="all")]

    def _columns(self, project, table):
        rows = self._rows(
            project,
            f"select json_keys, column_name, data_type, status from {project.test_schema}."
            f"raw_schema_registry where table_name = '{table}'",
        )
        # Keyed by dotted path, except the one key that holds a dot itself.
        return {
            (tuple(keys) if list(keys) == ["a.b"] else ".".join(keys)): (name, data_type, status)
            for keys, name, data_type, status in rows
        }

    def test_hostile_batch_then_drift(self, project, inbox):
        schema = project.test_schema
        batch_file = _write_batch(inbox / "hostile" / "dt=2026-11-01", BATCH_1)
        results, logs = run_dbt_and_capture(["build"])  # the invariant test is part of it
        # A raw model says what it is doing, in dbt's log.
        assert "batch 1 of 1" in logs and "3 lines accepted, 6 quarantined" in logs
        (warned,) = [r for r in results if "readable_event_times" in r.node.name]
        assert (str(warned.status), warned.failures) == ("warn", 1)  # "at tea time"

        columns = self._columns(project, "raw_hostile")
        assert "always_null" not in columns and "empty" not in columns
        names = {path: name for path, (name, _, _) in columns.items()}
        # Case-only, dot-vs-nesting and space-vs-underscore collisions get distinct names.
        assert names["Name"] != names["name"] and {"name"} & {names["Name"], names["name"]}
        assert names["a.b"] == "a_b" and names[("a.b",)].startswith("a_b_")  # nested vs key "a.b"
        assert names["first name"] != names["first_name"]
        assert names["sel;ect--"] == "sel_ect" and names["quote's"] == "quote_s"
        assert columns["big"][1] == "string" and columns["tags"][1] == "array<string>"

        raw = f"{schema}.raw_hostile"
        picked = [names[k] for k in ("Name", "name", "first name", "emoji 📷", "both'\"")]
        (row,) = self._rows(
            project,
            f"select `{picked[0]}`, `{picked[1]}`, `{picked[2]}`, big, length(long), tags,"
            f" n_deep, `{picked[3]}`, `{picked[4]}`, _event_date,"
            f" _source_file, _line_number from {raw} where id = 1",
        )
        assert row[:5] == ("Upper", "lower", "spaced", "123456789012345678901234567890", 5000)
        assert list(row[5]) == ["x", "y"] and row[6] is True and row[7] == "cam" and row[8] == "b"
        assert str(row[9]) == "2026-11-01" and row[10:] == (str(batch_file), 1)
        # The inbox is the raw archive: the row's lineage leads back to its line.
        args = json.dumps({"source_file": row[10], "line_number": row[11]})
        _, logs = run_dbt_and_capture(["run-operation", "original_line", "--args", args])
        assert BATCH_1[0] in logs

        children = self._rows(
            project,
            f"select _parent_id, _index, items_sku, items_qty from {raw}__items order by _index",
        )
        assert children == [("1", 0, "a", 1), ("1", 1, "b", 2)]

        quarantined = self._rows(
            project,
            f"select line_number, reason, raw_base64 from {schema}.raw_quarantine"
            " order by line_number",
        )
        assert [(n, reason) for n, reason, _ in quarantined] == [
            (3, "not_an_object"),
            (4, "unparseable_json"),
            (5, "nesting_too_deep"),
            (6, "invalid_utf8"),
            (7, "empty_line"),
            (8, "line_too_long"),
        ]
        import base64

        assert base64.b64decode(quarantined[3][2]) == INVALID_UTF8

        # Batch 2: id turns to text, qty to 2.5, new attributes beyond the cap. No
        # column changes type: what a column cannot hold is kept in its __text companion.
        _write_batch(inbox / "hostile" / "dt=2026-11-03", BATCH_2)
        run_dbt(["build"])
        columns = self._columns(project, "raw_hostile")
        assert columns["id"][1] == "bigint" and columns["Name"][2] == "stale"
        assert "n.new1" in columns and "new2" in columns and "new3" not in columns
        ids = self._rows(project, f"select id, id__text, _overflow from {raw} order by id")
        assert [(i, text) for i, text, _ in ids] == [
            (None, "x-3"),
            (1, None),
            (2, None),
            (10, None),
        ]
        assert ids[0][2] == {"new3": "3", "new4": "4"}
        qty = self._rows(
            project,
            f"select items_sku, items_qty, items_qty__text, items_color, _parent_id"
            f" from {raw}__items order by items_sku",
        )
        assert qty == [
            ("a", 1, None, None, "1"),
            ("b", 2, None, None, "1"),
            ("c", None, "2.5", "red", "x-3"),
        ]

        # A third run finds nothing new and changes nothing.
        before = self._rows(project, f"select count(*), max(_ingested_at) from {raw}")
        run_dbt(["build"])
        assert self._rows(project, f"select count(*), max(_ingested_at) from {raw}") == before
        ledger = self._rows(
            project, f"select state, count(*) from {schema}.raw_file_ledger group by 1"
        )
        assert ledger == [("committed", 2)]


FROZEN_BATCH_1 = [json.dumps({"id": 1, "ts": "2026-11-01T10:00:00Z", "_data": {"n": 1}})]
FROZEN_BATCH_2 = [json.dumps({"id": 2, "ts": "2026-11-02T10:00:00Z", "_data": {"new": "x"}})]
ROUTED_TOPIC = {
    "record_key": ["id"],
    "event_time": "ts",
    "schema_mode": ROUTED_MODES,
    "hints": {"dv.t": "timestamp"},
}
FROZEN_TOPIC = {"record_key": ["id"], "event_time": "ts", "schema_mode": {"_data": "freeze"}}
HINTED_TOPIC = {"record_key": ["id"], "event_time": "ts", "hints": {"ts": "timestamp"}}
# Frozen by its topic's entry, which knows no time_formats; its model's meta overrides both.
OVERRIDDEN_TOPIC = {"record_key": ["id"], "event_time": "ts", "schema_mode": "freeze"}
MODEL_META = {"schema_mode": {"*": "evolve", "x": "rescue"}, "time_formats": ["dd/MM/yyyy HH:mm"]}
OVERRIDDEN_BATCHES = [
    [json.dumps({"id": 1, "ts": "01/11/2026 10:00", "seen": "01/11/2026 10:30", "x": {"a": 1}})],
    [json.dumps({"id": 2, "ts": "02/11/2026 10:00", "seen": "bad", "x": {"a": 2, "b": "new"}})],
]
HINTED_BATCH = [
    json.dumps({"id": 1, "ts": "2026-11-01T10:00:00Z"}),
    json.dumps({"id": 2, "ts": "at tea time"}),
]


COMPACTED_TOPIC = {"record_key": ["id"], "event_time": "ts"}


class SchemaControlSuite:
    """Schema control through `dbt`: a topic with a prefix per routing mode (rescue,
    discard_row, discard_value; hinted too), a topic frozen under `_data` (the first
    batch sets the schema; a batch with a new key there fails the raw model naming the
    path, writes nothing, and stays pending until the path is thawed), and a topic
    whose event time is hinted as a timestamp (what it cannot hold kept as text); a
    model whose meta overrides its topic's mode and declares time formats."""

    @pytest.fixture(scope="class")
    def inbox(self, tmp_path_factory):
        return tmp_path_factory.mktemp("inbox")

    @pytest.fixture(scope="class")
    def project_config_update(self, inbox):
        topics = {
            "frozen": FROZEN_TOPIC,
            "hinted": HINTED_TOPIC,
            "routed": ROUTED_TOPIC,
            "overridden": OVERRIDDEN_TOPIC,
            "compacted": COMPACTED_TOPIC,
        }
        return {
            "vars": {"inbox_dir": str(inbox), "raw_topics": topics},
            "on-run-start": ["{{ create_ingestion_tables() }}"],
        }

    @pytest.fixture(scope="class")
    def models(self):
        from dynamic_ddl.ingest.raw_models import model_source

        properties = _project_sources()
        properties["models"].append({"name": "raw_overridden", "config": {"meta": MODEL_META}})
        compaction = {"compact_every": 2, "compact_after_days": 0}
        properties["models"].append({"name": "raw_compacted", "config": compaction})
        return {
            "raw_frozen.py": model_source(FROZEN_TOPIC),
            "raw_hinted.py": model_source(HINTED_TOPIC),
            "raw_routed.py": model_source(ROUTED_TOPIC),
            "raw_overridden.py": model_source(OVERRIDDEN_TOPIC),
            "raw_compacted.py": model_source(COMPACTED_TOPIC),
            "_raw.yml": yaml.safe_dump(properties),
        }

    def test_each_routing_mode_through_dbt_build(self, project, inbox):
        """What would change the routed topic's schema lands in `_overflow`, in
        quarantine as whole lines, or in raw_quarantined_values; the quarantine's source
        tests (the reasons it may hold) pass, and the schema is batch 1's."""
        schema = project.test_schema
        selected = ["build", "--select", "raw_routed", "source:ingestion.raw_quarantine"]
        _write_batch(inbox / "routed" / "dt=2026-11-01", ROUTED_BATCH_1)
        run_dbt(selected)
        _write_batch(inbox / "routed" / "dt=2026-11-02", ROUTED_BATCH_2)
        run_dbt(selected)
        rows = project.run_sql(
            "select id, r_n, dv_n, e, _overflow['r.n'], _overflow['r.new'],"
            f" size(coalesce(_overflow, map())) from {schema}.raw_routed order by id",
            fetch="all",
        )
        assert [tuple(row) for row in rows] == [
            (1, 1, 1, None, None, None, 0),
            (2, None, None, None, "two", "true", 3),
            (5, None, None, None, None, None, 0),
            (6, 6, 6, 1, None, None, 0),
        ]
        quarantined = project.run_sql(
            f"select reason, count(*) from {schema}.raw_quarantine where topic = 'routed'"
            " group by 1",
            fetch="all",
        )
        assert [tuple(row) for row in quarantined] == [("discard_row", 3)]
        values = project.run_sql(
            f"select json_path, element_index, value from {schema}.raw_quarantined_values"
            " where topic = 'routed' order by 1",
            fetch="all",
        )
        assert [tuple(row) for row in values] == [
            ("dv.items", None, '[{"k":5}]'),
            ("dv.list[].q", 1, "z"),
            ("dv.n", None, "five"),
            ("dv.new", None, "x"),
            ("dv.t", None, "soon"),
        ]

    def test_a_models_meta_overrides_its_topics_schema_control(self, project, inbox):
        """The model's meta rescues what its topic's freeze would refuse, and its
        time_formats type the event time and a new path as timestamps (a later value
        that is no time keeps its text in `__text`, as `*` evolves)."""
        raw = f"{project.test_schema}.raw_overridden"
        for day, lines in zip(("2026-11-01", "2026-11-02"), OVERRIDDEN_BATCHES, strict=True):
            _write_batch(inbox / "overridden" / f"dt={day}", lines)
            run_dbt(["build", "--select", "raw_overridden"])
        types = {row[0]: row[1] for row in project.run_sql(f"describe {raw}", fetch="all")}
        assert (types["ts"], types["seen"], types["x_a"]) == ("timestamp", "timestamp", "bigint")
        rows = project.run_sql(
            f"select id, string(ts), string(seen), seen__text, x_a, _overflow['x.b'] from {raw}"
            " order by id",
            fetch="all",
        )
        assert [tuple(row) for row in rows] == [
            (1, "2026-11-01 10:00:00", "2026-11-01 10:30:00", None, 1, None),
            (2, "2026-11-02 10:00:00", None, "bad", 2, "new"),
        ]

    def test_a_new_key_under_a_frozen_prefix_fails_the_batch_until_thawed(self, project, inbox):
        raw = f"{project.test_schema}.raw_frozen"
        _write_batch(inbox / "frozen" / "dt=2026-11-01", FROZEN_BATCH_1)
        _write_batch(inbox / "hinted" / "dt=2026-11-01", HINTED_BATCH)
        run_dbt(["build", "--select", "raw_frozen", "raw_hinted"])
        hinted = project.run_sql(
            f"select id, cast(ts as string), ts__text from {project.test_schema}.raw_hinted"
            " order by id",
            fetch="all",
        )
        assert [tuple(row) for row in hinted] == [
            (1, "2026-11-01 10:00:00", None),
            (2, None, "at tea time"),
        ]
        _write_batch(inbox / "frozen" / "dt=2026-11-02", FROZEN_BATCH_2)
        _, logs = run_dbt_and_capture(["build", "--select", "raw_frozen"], expect_pass=False)
        assert "_data.new (new key)" in logs and "schema_mode freeze" in logs
        assert project.run_sql(f"select id from {raw}", fetch="all") == [(1,)]
        ledger = project.run_sql(
            f"select state, count(*) from {project.test_schema}.raw_file_ledger"
            " where topic = 'frozen' group by 1",
            fetch="all",
        )
        assert sorted(map(tuple, ledger)) == [("committed", 1), ("pending", 1)]
        thawed = {"record_key": ["id"], "event_time": "ts"}
        topics = {"frozen": thawed, "hinted": thawed, "routed": ROUTED_TOPIC, "overridden": thawed}
        thawed = json.dumps({"raw_topics": topics})
        run_dbt(["build", "--select", "raw_frozen", "--vars", thawed])
        rows = project.run_sql(f"select id, data_new from {raw} order by id", fetch="all")
        assert [tuple(row) for row in rows] == [(1, None), (2, "x")]

    def test_compaction_after_every_second_batch_and_on_demand(self, project, inbox):
        """`compact_every: 2` merges each day's batch partitions when the second batch
        commits; `dbt run-operation compact` does it on demand; rows and their batch
        ids stay as they were."""
        raw = f"{project.test_schema}.raw_compacted"

        def partitions() -> int:
            return len(project.run_sql(f"show partitions {raw}", fetch="all"))

        for number, days in enumerate((("01", "02"), ("01", "02"), ("01",))):
            lines = [
                json.dumps({"id": f"{number}{d}", "ts": f"2026-11-{d}T08:00:00Z"}) for d in days
            ]
            _write_batch(inbox / "compacted" / f"dt=2026-11-0{number + 1}", lines)
            _, logs = run_dbt_and_capture(["run", "--select", "raw_compacted"])
            if number == 1:
                assert "compacted 4 partitions in 4 files into 2 partitions" in logs
                assert partitions() == 2
        assert partitions() == 3
        args = json.dumps({"model": "raw_compacted"})
        _, logs = run_dbt_and_capture(["run-operation", "compact", "--args", args])
        assert "compacted 3 partitions in 3 files into 2 partitions in 2 files" in logs
        rows = project.run_sql(
            f"select id, _event_date, _batch_id <= _slot from {raw} order by id", fetch="all"
        )
        assert [tuple(map(str, row)) for row in rows] == [
            ("001", "2026-11-01", "True"),
            ("002", "2026-11-02", "True"),
            ("101", "2026-11-01", "True"),
            ("102", "2026-11-02", "True"),
            ("201", "2026-11-01", "True"),
        ]
        batches = project.run_sql(f"select count(distinct _batch_id) from {raw}", fetch="one")
        assert batches[0] == 3


class TestSchemaControl(SchemaControlSuite):
    @pytest.fixture(scope="class")
    def dbt_profile_target(self):
        return session_profile()


class TestSchemaControlThrift(SchemaControlSuite):
    @pytest.fixture(scope="class")
    def dbt_profile_target(self, thrift_server):
        from tests.adapter.targets import thrift_profile

        return thrift_profile(thrift_server)
