"""The raw model of the topic in its name (raw_<topic>): see dynamic_ddl.ingest.job.

Generated from vars.raw_topics by `python -m dynamic_ddl.ingest topics`
(`make topics`): edit the topic's entry in dbt_project.yml, not this file.
"""

from dynamic_ddl.ingest.job import ingest_topic


def model(dbt, session):
    # In the model itself: dbt sets Python models to "table" over dbt_project.yml.
    # meta.raw_topic is the topic's entry, for the docs site (the run reads
    # vars.raw_topics; schema_mode, hints, time_formats in the model's meta win).
    dbt.config(materialized="raw_ingest", meta={'raw_topic': {'record_key': ['id', 'record_key', 'log_ts'], 'event_time': 'log_ts', 'schema_mode': 'evolve', 'hints': {'record_value': 'string', 'id': 'string'}, 'time_formats': []}})
    # Ingestion reads these tables (fresh, by name); declared so lineage shows it.
    dbt.source("ingestion", "raw_file_ledger")
    dbt.source("ingestion", "raw_file_ledger_archive")
    dbt.source("ingestion", "raw_schema_registry")
    return ingest_topic(session, dbt.config.get("raw_ingest"))
