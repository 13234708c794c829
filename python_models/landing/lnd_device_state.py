"""Landing device state: the latest reported state per device, upserted from raw.

Each run takes only the raw batches this table has not seen, and the
`upsert` strategy keeps the latest `updated_at` per serial, rewriting only
the serial buckets that change. A state with `deleted: true` (a device
decommissioned) removes the device. A state without a serial stays in raw only.
"""

from dynamic_ddl.landing.rows import landing_rows, unseen_batches


def model(dbt, session):
    dbt.config(
        materialized="incremental",
        incremental_strategy="upsert",
        unique_key="serial",
        ordering_field="updated_at",
        # Equal updated_at: the later line wins (newer batch, file path, line), so a
        # build from scratch (the inbox in path order) keeps what incremental runs keep.
        tie_break=["_batch_id", "_source_file", "_line_number"],
        # The feed sends `deleted: true` for a decommissioned device: its row goes.
        delete_marker="deleted",
        partition_by=["serial_bucket"],
        on_schema_change="append_new_columns",
    )
    landing = str(dbt.this) if dbt.is_incremental else None
    # Raw and landing share the target's schema (dbt_project.yml sets none of their own).
    raw_table = f"{dbt.this.schema}.raw_device_state"
    raw = unseen_batches(session, dbt.ref("raw_device_state"), raw_table, landing)
    return landing_rows(
        raw, key="serial", event_time="updated_at", buckets=8, delete_marker="deleted"
    )
