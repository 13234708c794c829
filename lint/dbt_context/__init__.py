"""What dbt's Jinja context gives our macros, for sqlfluff's jinja templater.

sqlfluff lints models rendered without a warehouse (`execute` is false), as
`dbt parse` sees them; its dbt builtins lack these names, so the templater
loads this package (library_path in .sqlfluff). Nothing here touches Spark.
"""

from __future__ import annotations

import hashlib as _hashlib
import re as _re
from types import SimpleNamespace as _Namespace

from jinja2 import pass_context as _pass_context

execute = False
modules = _Namespace(re=_re)


def local_md5(value: str) -> str:
    """dbt's local_md5: the MD5 hex digest of the text."""
    return _hashlib.md5(value.encode("utf-8")).hexdigest()


def env_var(name: str, default: str | None = None) -> str:
    """dbt's env_var: the default stands in for the environment."""
    return default if default is not None else ""


def _project_macro(name: str):
    """The macro `name` as sqlfluff loaded it (wrapped, so `return()` works),
    looked up in the globals of the calling template."""

    @_pass_context
    def call(context, *args, **kwargs):
        return context.parent[name](*args, **kwargs)

    return call


class _Project:
    """dbt's project namespace: `dynamic_ddl.pivot_plan(...)` calls our macro."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _project_macro(name)


class _Exceptions:
    @staticmethod
    def raise_compiler_error(message: str) -> None:
        raise ValueError(message)


class _Config:
    """dbt's `config`: callable in a model; `get` and `meta_get` give the default."""

    def __call__(self, *args, **kwargs) -> str:
        return ""

    def get(self, name: str, default=None):
        return default

    def meta_get(self, name: str, default=None):
        return default


class _Adapter:
    """The parts of dbt's `adapter` the macros use when not executing."""

    @staticmethod
    def quote(identifier: str) -> str:
        return f"`{identifier}`"

    @staticmethod
    def string_literal(value: str) -> str:
        """The adapter's own: pure text, no warehouse needed."""
        from dynamic_ddl.sql_text import string_literal

        return string_literal(value)

    @staticmethod
    def event_timestamp_sql(expression: str, formats: str | list[str | None] | None = None) -> str:
        """The adapter's own: pure SQL text, no warehouse needed."""
        from dynamic_ddl.schema.event_time import event_timestamp_sql

        return event_timestamp_sql(expression, formats)

    @staticmethod
    def dispatch(macro_name: str, macro_namespace: str | None = None):
        """The project's `default__<macro_name>`."""
        return _project_macro(f"default__{macro_name}")


dynamic_ddl = _Project()
exceptions = _Exceptions()
config = _Config()
adapter = _Adapter()
