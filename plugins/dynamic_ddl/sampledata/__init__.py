"""Deterministic sample data: see generator.py and `python -m dynamic_ddl.sampledata --help`."""
