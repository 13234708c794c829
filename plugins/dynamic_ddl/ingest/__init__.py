"""Ingestion: topic configuration, the inbox of JSON files, (later) the file ledger."""
