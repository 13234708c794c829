"""The `dbt_jinja` templater: sqlfluff's jinja templater, plus dbt's
`{% materialization name, adapter='...' %}` block.

Plain Jinja rejects the tag, so a materialization file would fail to
template. Here the block parses like dbt parses it, as a macro
(`materialization_<name>_<adapter>`) that nothing calls: its body is
linted the way every macro body is.
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


class DbtJinjaTemplater(JinjaTemplater):
    """sqlfluff's jinja templater (same options) that also parses dbt materializations."""

    name = "dbt_jinja"

    def _get_jinja_env(self, config=None):
        env = super()._get_jinja_env(config)
        env.add_extension(MaterializationExtension)
        return env
