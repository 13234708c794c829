"""The `dbt_jinja` templater: sqlfluff's jinja templater, plus dbt's
`{% materialization name, adapter='...' %}` and `{% snapshot name %}` blocks.

Plain Jinja rejects the tags, so such a file would fail to template. Here a
materialization parses like dbt parses it, as a macro
(`materialization_<name>_<adapter>`) that nothing calls: its body is
linted the way every macro body is. A snapshot's body is its query, so it
renders in place and is linted as a model is.
"""

from __future__ import annotations

import jinja2
import jinja2.nodes
from jinja2.ext import Extension
from sqlfluff.core.templaters.jinja import JinjaTemplater


class MaterializationExtension(Extension):
    """`{% materialization name, adapter='x' %} ... {% endmaterialization %}` as a macro."""

    tags = {"materialization"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Macro:
        node = jinja2.nodes.Macro(lineno=next(parser.stream).lineno)
        name = parser.parse_assign_target(name_only=True).name
        adapter = "default"
        while parser.stream.skip_if("comma"):
            key = parser.stream.expect("name").value
            parser.stream.expect("assign")
            value = parser.parse_expression()
            if key == "adapter" and isinstance(value, jinja2.nodes.Const):
                adapter = value.value
        node.name = f"materialization_{name}_{adapter}"
        node.args, node.defaults = [], []
        node.body = parser.parse_statements(("name:endmaterialization",), drop_needle=True)
        return node


class SnapshotExtension(Extension):
    """`{% snapshot name %} <query> {% endsnapshot %}` as the query itself."""

    tags = {"snapshot"}

    def parse(self, parser: jinja2.parser.Parser) -> list[jinja2.nodes.Node]:
        next(parser.stream)
        parser.parse_assign_target(name_only=True)
        return parser.parse_statements(("name:endsnapshot",), drop_needle=True)


class DbtJinjaTemplater(JinjaTemplater):
    """sqlfluff's jinja templater (same options) that also parses dbt materializations
    and snapshots."""

    name = "dbt_jinja"

    def _get_jinja_env(self, config=None):
        env = super()._get_jinja_env(config)
        env.add_extension(MaterializationExtension)
        env.add_extension(SnapshotExtension)
        return env
