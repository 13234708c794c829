"""SQL text built from data: the one place values become literals or identifiers.

Everything that pastes a value into SQL (a key, a path, a format, a name)
goes through here, so escaping is written, and tested, once.
"""

from __future__ import annotations


def string_literal(value: str) -> str:
    r"""A Spark SQL string literal holding `value` exactly.

    Backslashes, quotes and line breaks are escaped (Spark's default
    `spark.sql.parser.escapedStringLiterals=false`), so no value can end
    the literal.

    Example:
        >>> string_literal("it's a \\ path")
        "'it\\'s a \\\\ path'"
    """
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    escaped = escaped.replace("\n", "\\n").replace("\r", "\\r")
    return f"'{escaped}'"


def quoted_identifier(name: str) -> str:
    """A Spark SQL identifier in backquotes, backquotes inside doubled.

    Example:
        >>> quoted_identifier("we`ird")
        '`we``ird`'
    """
    return "`" + name.replace("`", "``") + "`"
