"""sqlfluff plugin: the `dbt_jinja` templater, sqlfluff's jinja templater plus the
`{% materialization %}` block, so the adapter's materializations lint too.

Registered through the `sqlfluff` entry point in pyproject.toml.
"""

from __future__ import annotations

from sqlfluff.core.plugin import hookimpl

from dynamic_ddl.lint.templater import DbtJinjaTemplater


@hookimpl
def get_templaters():
    """sqlfluff's hook: the templaters this plugin adds."""
    return [DbtJinjaTemplater]
