"""Raw layer of the topic in this file's name (raw_<topic>): see dynamic_ddl.ingest.job.

Every raw model is this same file: the topic's settings live in
vars.raw_topics of dbt_project.yml, and the `raw_ingest` materialization
passes them in as config "raw_ingest".
"""

from dynamic_ddl.ingest.job import ingest_topic


def model(dbt, session):
    # In the model itself: dbt sets Python models to "table" over dbt_project.yml.
    dbt.config(materialized="raw_ingest")
    # Ingestion reads these two tables (fresh, by name); declared so lineage shows it.
    dbt.source("ingestion", "raw_file_ledger")
    dbt.source("ingestion", "raw_schema_registry")
    return ingest_topic(session, dbt.config.get("raw_ingest"))
