"""Event times as feeds send them: ISO 8601, the common text formats, epoch seconds or ms.

One SQL expression (`event_timestamp_sql`) reads them all; the raw layer's
`_event_date`, the Python landing models and the SQL landing models (through
the `event_timestamp` macro and the adapter) all use it, so an event time
means the same everywhere. The order of tries:

1. ISO 8601 as a timestamp column takes it (schema/exact.py): one instant,
   whatever else is declared, so the column and `_event_date` agree;
2. the topic's declared formats (Spark datetime patterns: `event_time_format`,
   then `time_formats`, which every other path's typed times read too);
3. a number, or text that is one: epoch seconds, or milliseconds when its
   magnitude is 1e11 or more (1e11 s is the year 5138; 1e11 ms, 1973);
4. ISO 8601 in Spark's wider reading (`2026-11-01`, a date alone, ...);
5. COMMON_FORMATS (`Sun Aug 31 00:29:15 +0000 2014`, RFC 1123, ...), after
   dropping a leading day of the week.

A value none of them reads gives NULL, and so does a time outside the years 1 to
9999 (Python's, where dbt and the models collect days); the raw row keeps its
text, and the `readable_event_times` test and the run summary count such rows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from dynamic_ddl.schema.exact import ISO_TIMESTAMP
from dynamic_ddl.sql_text import string_literal

# Tried on the text without a leading day of the week (`Sun `, `Mon, `):
# Spark 3+ cannot parse the pattern letter E.
COMMON_FORMATS = (
    "MMM dd HH:mm:ss Z yyyy",  # Twitter and many REST APIs: Sun Aug 31 00:29:15 +0000 2014
    "dd MMM yyyy HH:mm:ss z",  # RFC 1123, HTTP dates: Sun, 31 Aug 2014 00:29:15 GMT
    "yyyy/MM/dd HH:mm:ss",
    "dd/MM/yyyy HH:mm:ss",
)
_DAY_OF_WEEK = "^[A-Za-z]{3},?\\s+"
# A plain number (a double's text may have an exponent: 1.7E12).
_NUMBER = "^-?[0-9]+([.][0-9]+)?([eE][+-]?[0-9]+)?$"


def declared_formats(formats: str | Sequence[str | None] | None) -> tuple[str, ...]:
    """A topic's declared formats as a tuple, without the unset ones.

    Example:
        >>> declared_formats(("dd.MM.yyyy", None)), declared_formats("HH:mm")
        (('dd.MM.yyyy',), ('HH:mm',))
    """
    if formats is None:
        return ()
    if isinstance(formats, str):
        return (formats,)
    return tuple(f for f in formats if f)


def event_timestamp_sql(expression: str, formats: str | Sequence[str | None] | None = None) -> str:
    """SQL for the timestamp of an event time `expression` (any type), NULL when unreadable.
    `formats` are the topic's declared formats (one, or several tried in order).

    Example:
        >>> "timestamp_seconds" in event_timestamp_sql("t.ts")
        True
    """
    text = f"cast({expression} as string)"
    number = f"try_cast({text} as double)"
    iso_text = f"{text} rlike {string_literal(ISO_TIMESTAMP)}"
    iso = f"case when {iso_text} then try_cast({text} as timestamp) end"
    tries = [iso] + [
        f"try_to_timestamp({text}, {string_literal(pattern)})"
        for pattern in declared_formats(formats)
    ]
    tries.append(
        # Below 1e14 (ms in the year 5138): timestamp_seconds cannot overflow.
        f"case when {text} rlike {string_literal(_NUMBER)} and abs({number}) < 1e14 "
        f"then timestamp_seconds(case when abs({number}) >= 1e11 then {number} / 1000 "
        f"else {number} end) end"
    )
    tries.append(f"try_to_timestamp({text})")
    undayed = f"regexp_replace({text}, {string_literal(_DAY_OF_WEEK)}, '')"
    tries += [f"try_to_timestamp({undayed}, {string_literal(f)})" for f in COMMON_FORMATS]
    read = "coalesce(" + ", ".join(tries) + ")"
    # Spark holds years before 1 and after 9999 (`0000-06-15`, `-62150000000`); Python's
    # datetime does not, and every reader that collects a day (an upsert's partitions,
    # a landing model's days) failed on it, for good. Such a time is no event's.
    return f"case when year({read}) between 1 and 9999 then {read} end"


def declared_timestamp(text: Column, formats: Sequence[str]) -> Column:
    """The timestamp of `text` in the first of a topic's declared formats that reads it
    whole, else NULL (for typed times at any path: ISO 8601 is read without them)."""
    if not formats:
        return F.lit(None).cast("timestamp")
    return F.coalesce(*[F.try_to_timestamp(text, F.lit(pattern)) for pattern in formats])


def lossy_pattern(pattern: str) -> bool:
    """Whether a declared pattern reads more fraction-of-second digits than a timestamp
    holds (microseconds: `SSSSSS`), so a time it reads would lose some.

    Example:
        >>> lossy_pattern("HH:mm:ss.SSSSSSSSS"), lossy_pattern("'SSSSSSS' HH:mm:ss.SSS")
        (True, False)
    """
    unquoted = re.sub(r"'[^']*'", "", pattern)
    return re.search(r"S{7,}", unquoted) is not None
