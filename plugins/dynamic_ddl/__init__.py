"""dynamic_ddl: structure for drifting JSON on Spark."""
