"""SQL text built from data: the one place values become literals, identifiers,
locations or partition specs.

Everything that pastes a value into SQL (a key, a path, a format, a name, a
partition value, a table location) goes through here, so escaping is
written, and tested against hostile values, once. Jinja reaches it through
the adapter (`adapter.string_literal`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

# Characters Spark escapes (as %XX) in partition directory names.
_PATH_ESCAPED = {chr(c) for c in range(1, 32)} | set("\"#%'*/:=?\\\x7f{[]^")


def string_literal(value: str) -> str:
    r"""A Spark SQL string literal holding `value` exactly.

    Backslashes, quotes and line breaks are escaped (Spark's default
    `spark.sql.parser.escapedStringLiterals=false`), so no value can end
    the literal; `$` too, so `${var}` is not replaced by a variable.

    Example:
        >>> string_literal("it's a \\ path")
        "'it\\'s a \\\\ path'"
    """
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    escaped = escaped.replace("\n", "\\n").replace("\r", "\\r")
    # Spark (and Hive over Thrift) substitute `${name}` in the statement's text
    # before parsing it, inside literals too: a `$` is written as its escape.
    escaped = escaped.replace("$", "\\u0024")
    return f"'{escaped}'"


def sql_literal(value: Any) -> str:
    """A SQL literal for a partition value or a text: None is null, booleans and
    integers as themselves, anything else as a string literal.

    Example:
        >>> sql_literal(None), sql_literal(True), sql_literal(7), sql_literal("a'b")
        ('null', 'true', '7', "'a\\\\'b'")
    """
    if value is None:
        return "null"
    if isinstance(value, bool | int):
        return str(value).lower()
    return string_literal(str(value))


def bound_text(value: Any) -> str | None:
    """A value dbt binds into `cast(%s as <type>)` (a seed cell), as text the cast reads
    exactly: a number with every digit as written (dbt-spark sent a float:
    9007199254740993 was stored as ...992, 1E+400 as a column name), a time in UTC to
    the microsecond (its offset was dropped, and the Thrift target cut it to
    milliseconds; found by review); None stays None.

    Example:
        >>> from decimal import Decimal
        >>> from datetime import timedelta, timezone
        >>> bound_text(Decimal("9007199254740993")), bound_text(Decimal("1E+2"))
        ('9007199254740993', '100')
        >>> bound_text(datetime(2026, 11, 1, 10, 0, 0, 123456, timezone(timedelta(hours=5.5))))
        '2026-11-01 04:30:00.123456'
        >>> bound_text(float("nan")), bound_text(False), bound_text(None)
        ('NaN', 'false', None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")  # `1E+2` is no bigint to a cast
    if isinstance(value, float):
        return _java_double(value)
    return str(value)


def quoted_identifier(name: str) -> str:
    """A Spark SQL identifier in backquotes, backquotes inside doubled.

    Example:
        >>> quoted_identifier("we`ird")
        '`we``ird`'
    """
    return "`" + name.replace("`", "``") + "`"


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def ddl_type(described: dict[str, Any]) -> str:
    """A column's type as `describe table extended ... as json` gives it, as DDL reads it
    back: as `describe` writes it, but with a struct's field names quoted where they need
    it. `describe` writes them bare (`struct<a-b:int,c:d:string>`), and a table created
    from that text failed (found by review: an upsert's version store).

    Example:
        >>> ddl_type({"name": "struct", "fields": [
        ...     {"name": "a-b", "type": {"name": "timestamp_ltz"}},
        ...     {"name": "ok", "type": {"name": "map", "key_type": {"name": "string"},
        ...         "value_type": {"name": "decimal", "precision": 10, "scale": 2}}},
        ... ]})
        'struct<`a-b`:timestamp,ok:map<string,decimal(10,2)>>'
    """
    kind = described["name"]
    if kind == "struct":
        fields = [
            f"{_field_name(field['name'])}:{ddl_type(field['type'])}"
            for field in described["fields"]
        ]
        return f"struct<{','.join(fields)}>"
    if kind == "array":
        return f"array<{ddl_type(described['element_type'])}>"
    if kind == "map":
        return f"map<{ddl_type(described['key_type'])},{ddl_type(described['value_type'])}>"
    if kind == "decimal":
        return f"decimal({described['precision']},{described['scale']})"
    if kind in ("char", "varchar"):
        return f"{kind}({described['length']})"
    if kind == "timestamp_ltz":
        return "timestamp"
    if kind == "interval":
        start, end = described["start_unit"], described["end_unit"]
        return f"interval {start}" if start == end else f"interval {start} to {end}"
    collation = described.get("collation", "UTF8_BINARY")
    return kind if collation == "UTF8_BINARY" else f"{kind} collate {collation}"


def _field_name(name: str) -> str:
    return name if _PLAIN_NAME.fullmatch(name) else quoted_identifier(name)


def quoted_table(table: str) -> str:
    """`schema.table` with each part quoted (names never hold a dot: dbt and naming.py
    make them).

    Example:
        >>> quoted_table("raw.events__dbt_new")
        '`raw`.`events__dbt_new`'
    """
    return ".".join(quoted_identifier(part) for part in table.split("."))


def location_clause(location: str) -> str:
    """` location '<path>'` for CREATE TABLE or ADD PARTITION, the path escaped."""
    return f" location {string_literal(location)}"


def glob_escaped(path: str) -> str:
    r"""`path` as a Hadoop glob pattern that matches only itself: `\`, `*`, `?`, `[`,
    `]`, `{` and `}` escaped with a backslash, so a folder named `a[1]` or `c*`
    lists itself and never a sibling. Append the wildcards after it.

    Example:
        >>> glob_escaped("/wh/t[1]{a,b}*?") + "/*.parquet"
        '/wh/t\\[1\\]\\{a,b\\}\\*\\?/*.parquet'
    """
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", path)


def partition_spec(columns: Sequence[str], values: Sequence[Any]) -> str:
    """`partition (day = '2026-11-01', kind = 'a')` for ALTER TABLE and INSERT.

    Example:
        >>> partition_spec(["topic"], ["it's"])
        "partition (`topic` = 'it\\\\'s')"
    """
    pairs = ", ".join(
        f"{quoted_identifier(c)} = {sql_literal(v)}" for c, v in zip(columns, values, strict=True)
    )
    return f"partition ({pairs})"


def located_partition(columns: Sequence[str], values: Sequence[Any], location: str) -> str:
    """A partition spec with the folder it reads, for `ALTER TABLE ... ADD`.

    Example:
        >>> located_partition(["day"], [None], "file:/w/t/day=x")
        "partition (`day` = null) location 'file:/w/t/day=x'"
    """
    return f"{partition_spec(columns, values)} location {string_literal(location)}"


NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # the directory of a NULL partition value


def partitions_predicate(columns: Sequence[str], paths: Sequence[str], qualifier: str = "") -> str:
    """A filter keeping the rows of the partitions at `paths` (partition_path's form), so
    that Spark reads those partitions only; `false` for none (see rows_predicate).

    Example:
        >>> partitions_predicate(["day"], ["day=2026-11-01", "day=__HIVE_DEFAULT_PARTITION__"])
        "(`day` in ('2026-11-01') or `day` is null)"
    """
    return rows_predicate(columns, [path_row(path) for path in paths], qualifier)


def rows_predicate(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], qualifier: str = ""
) -> str:
    """A filter keeping rows whose `columns` hold one of `rows` (tuples of values, None
    matching NULL: a NULL partition is a partition like any other); `false` for none.
    `qualifier` prefixes the columns (a table or an alias, pasted as given).

    Example:
        >>> rows_predicate(["day"], [("2026-11-01",), (None,)])
        "(`day` in ('2026-11-01') or `day` is null)"
        >>> rows_predicate(["d", "k"], [("1", "a/b"), ("2", None)], "t")
        "((t.`d` = '1' and t.`k` = 'a/b') or (t.`d` = '2' and t.`k` is null))"
    """
    if not rows:
        return "false"
    prefix = f"{qualifier}." if qualifier else ""
    names = [prefix + quoted_identifier(column) for column in columns]
    unique = sorted({tuple(row) for row in rows}, key=repr)
    if len(columns) == 1:
        listed = [sql_literal(v) for (v,) in unique if v is not None]
        terms = [f"{names[0]} in ({', '.join(listed)})"] if listed else []
        terms += [f"{names[0]} is null"] if len(listed) < len(unique) else []
        return "(" + " or ".join(terms) + ")"

    def equal(name: str, value: Any) -> str:
        return f"{name} is null" if value is None else f"{name} = {sql_literal(value)}"

    terms = [
        "(" + " and ".join(equal(n, v) for n, v in zip(names, row, strict=True)) + ")"
        for row in unique
    ]
    return "(" + " or ".join(terms) + ")"


def partition_path(columns: Sequence[str], values: Sequence[Any]) -> str:
    """The partition's directory path, as Spark names it (NULL as NULL_PARTITION, a
    boolean as `true`/`false`).

    Example:
        >>> partition_path(["day", "kind"], ["2026-11-01", "a/b"])
        'day=2026-11-01/kind=a%2Fb'
        >>> partition_path(["day", "gone"], [None, True])
        'day=__HIVE_DEFAULT_PARTITION__/gone=true'
    """
    return "/".join(
        f"{_escape_path(c)}={_path_value(v)}" for c, v in zip(columns, values, strict=True)
    )


def _path_value(value: Any) -> str:
    if value is None:
        return NULL_PARTITION
    return _escape_path(spark_text(value))


def spark_text(value: Any) -> str:
    """A partition value as Spark's `cast(value as string)` writes it, which names its
    folder: a boolean in lower case, a time without trailing zeros in its fraction, a
    double as Java writes one. Python's own text differed (`10:00:00.500000`,
    `1e+20`): the upsert then missed a partition's remembered deletes (found by
    review).

    Example:
        >>> from datetime import datetime
        >>> spark_text(datetime(2026, 11, 1, 10, 0, 0, 500000)), spark_text(True)
        ('2026-11-01 10:00:00.5', 'true')
        >>> [spark_text(x) for x in (1e20, 100.0, 0.001, 1.5e-05, 12345678.9, -0.0)]
        ['1.0E20', '100.0', '0.001', '1.5E-5', '1.23456789E7', '-0.0']
    """
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, datetime):
        fraction = f"{value.microsecond:06d}".rstrip("0")
        return value.strftime("%Y-%m-%d %H:%M:%S") + (f".{fraction}" if fraction else "")
    if isinstance(value, float):
        return _java_double(value)
    return str(value)


def _java_double(number: float) -> str:
    """Java's Double.toString: plain from 1e-3 to 1e7, else d.dddE<exponent>; the
    digits Python's repr finds (the shortest that read back)."""
    if math.isnan(number) or math.isinf(number):
        return "NaN" if math.isnan(number) else ("-" if number < 0 else "") + "Infinity"
    if number == 0 or 1e-3 <= abs(number) < 1e7:
        plain = repr(number)
        if "e" in plain:  # repr writes some numbers of this range with an exponent
            plain = format(Decimal(plain), "f")
        return plain if "." in plain else plain + ".0"
    sign, digits, exponent = Decimal(repr(number)).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = exponent + len(text) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def path_values(path: str) -> list[str]:
    """The partition values in a path (partition_path's inverse, values as text).

    Example:
        >>> path_values("day=2026-11-01/kind=a%2Fb")
        ['2026-11-01', 'a/b']
    """
    return [unquote(part.split("=", 1)[1]) for part in path.split("/") if part]


def path_row(path: str) -> tuple[str | None, ...]:
    """The partition values in a path as a row for rows_predicate (NULL_PARTITION: None).

    Example:
        >>> path_row("day=__HIVE_DEFAULT_PARTITION__/kind=a%2Fb")
        (None, 'a/b')
    """
    return tuple(None if v == NULL_PARTITION else v for v in path_values(path))


def unescape_path(text: str) -> str:
    """One escaped path segment as text (`a%2Fb` -> `a/b`)."""
    return unquote(text)


def _escape_path(text: str) -> str:
    return "".join(f"%{ord(ch):02X}" if ch in _PATH_ESCAPED else ch for ch in text)
