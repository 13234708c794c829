"""Entry point dbt imports for `type: dynamic_spark`; the code lives in dynamic_ddl.adapter."""

from dynamic_ddl.adapter import Plugin

__all__ = ["Plugin"]
