"""A batch of JSON-lines files, parsed once, each line accepted or given a reason.

Spark's JSON reader infers the batch's schema, then `from_json` parses each
line of `spark.read.text` with that schema (the registry's types where a
column already exists). Parsing text rather than reading JSON directly keeps
each line's place in its file and the text of rejected lines. Lines carry
where they were read (`_split_start`, `_row_id`), from which `line_numbers`
numbers them.

Nothing is dropped: a line either parses into an object or carries the
reason it goes to quarantine:

    line_too_long     longer than LineLimits.max_line_bytes (never parsed)
    invalid_utf8      bytes that are not UTF-8 (kept exactly, base64, in quarantine)
    empty_line        nothing but whitespace
    not_an_object     valid JSON, but an array, a string, a number, ...
    unreadable_value  a JSON object the reader cannot read with the batch's
                      types (none known since empty_strings_as_text reads
                      "" as a string, where Spark's inference takes it for null)
    unparseable_json  not JSON at all (including nesting beyond Jackson's limit)
    not_strict_json   read only by a lenient parser: a key repeated in one object
                      (which value is meant is anyone's guess), a lone surrogate
                      escape, NaN, single quotes, text after the object, ...:
                      Spark's JSON reader would silently keep one of the values,
                      change the text or ignore the rest of the line
    empty_key         an object has the key "": Spark's reader drops such a
                      key with its value
    nesting_too_deep  objects/arrays nested deeper than LineLimits.max_depth
    number_out_of_range  a number beyond a double's range (`1e400`): Spark's reader
                      would store it as Infinity (see beyond_double)
    discard_row       a record that brings a new key, or a value its column
                      cannot hold, to a path whose schema_mode is discard_row

A line is accepted only when both Spark's JSON reader and its strict
RFC 8259 parser (`try_parse_json`, the VARIANT parser) take it (see
`is_strict_json`).

Inbox paths are handed to Spark literally (`sql_text.glob_escaped`): a file named
`[ab].json` is that file, not a pattern matching `a.json` and `b.json`.
"""

from __future__ import annotations

import logging
import operator
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    StringType,
    StructField,
    StructType,
)

from dynamic_ddl.ingest.inbox_links import by_position
from dynamic_ddl.ingest.ledger import InboxFile, UnreadableFile, fingerprint
from dynamic_ddl.schema.flatten import (
    deeper_than,
    holds_struct,
    leaves_of_kind,
    objects_in_array,
    positional_type,
    with_leaf_types,
)
from dynamic_ddl.schema.naming import JsonPath
from dynamic_ddl.sql_text import glob_escaped

# The reader's field for a line it cannot parse. Not `_corrupt_record`: a key of that
# name was taken for the field, and its value dropped from an accepted line (found by
# review); no key can hold this one's random part.
CORRUPT_RECORD = f"_corrupt_record_{secrets.token_hex(8)}"
RECORD = "_record"
REJECT_REASON = "_reject_reason"
LINE_NUMBER = "_line_number"
DISCARD_ROW_REASON = "discard_row"
# Progress and warnings of a raw model's run (bridged into dbt's log).
PROGRESS = logging.getLogger("dynamic_ddl.ingest")
# What every number beyond a double holds (1.8e308 needs an exponent of three digits,
# or with two at most 210 digits before its point); checked only where a text leaf
# shows Infinity's mark.
BIG_NUMBER = r"[0-9]{210}|[eE][+]?[0-9]{3}"
# The key "" in JSON text: `""` then `:`, not preceded by a backslash (an
# escaped quote inside a string); `""` followed by `:` appears nowhere else
# in valid JSON.
EMPTY_KEY = r'(?<!\\)""\s*:'
# The JSON reader's and from_json's limit on nesting (Jackson's, 1,000 by default).
MAX_NESTING = "maxNestingDepth"


# The deepest `max_depth` a topic may set: a batch's schema (as deep as its deepest
# accepted line) is read back into Python recursively, and through Spark Connect as
# nested protobuf messages, three per level: measured on the Thrift target, a line
# of 32 levels is read, one of 64 fails the client ("Exception deserializing response").
MAX_DEPTH = 32


@dataclass(frozen=True)
class LineLimits:
    """Lines longer than `max_line_bytes`, or nesting deeper than `max_depth`, are quarantined."""

    max_line_bytes: int = 1_000_000
    max_depth: int = 32


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect client session (not a classic one)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


@contextmanager
def case_sensitive(spark: SparkSession) -> Iterator[SparkSession]:
    """A session like `spark` that resolves names case-sensitively, inside the block.

    Schema inference needs it: with the default, keys such as `State` and
    `state` in one object fail as duplicate columns. A classic session is
    shared by dbt's threads, so the setting goes on a new session over the
    same SparkContext (its SQL settings are its own) rather than on `spark`;
    a Spark Connect session is the model's own, and is set back after (its
    `newSession` opens a server session no one closed: found by review, one
    per batch).
    """
    if not is_connect(spark):
        isolated = spark.newSession()
        isolated.conf.set("spark.sql.caseSensitive", "true")
        yield isolated
        return
    before = spark.conf.get("spark.sql.caseSensitive")
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        yield spark
    finally:
        spark.conf.set("spark.sql.caseSensitive", before)


def _json_reader(spark: SparkSession, max_depth: int):
    """The JSON reader of inference: a line nested deeper than `max_depth` is corrupt."""
    return (
        spark.read.option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_RECORD)
        .option(MAX_NESTING, max_depth)
    )


def infer_schema(
    spark: SparkSession,
    files: list[str],
    scratch: str | None = None,
    max_depth: int = LineLimits.max_depth,
) -> StructType:
    """The batch's schema, inferred by Spark's JSON reader over every line.

    Lines nested deeper than `max_depth` (quarantined as `nesting_too_deep`)
    are left out by the reader itself: found by review, a line of a few
    hundred levels (2 KB) gave a schema Python could not read back (a
    RecursionError), and of 400 levels one whose serialization overflowed
    the JVM's stack and ended the Spark driver (a Thrift server's too).

    Keys that are null in every line are kept (as string): the caller gives
    a path a column only once a record holds a value there. (The reader's
    dropFieldIfAllNull would also drop keys whose only value is "", which is
    a value, not a null.)

    A key repeated in one object fails the reader's inference
    (`COLUMN_ALREADY_EXISTS`; for a repeated key "`", `INVALID_ATTRIBUTE_NAME_SYNTAX`).
    Such lines go to quarantine (`not_strict_json`), so when inference fails
    the schema is inferred again from the strict-JSON lines alone, exactly
    the lines that can be accepted, copied as text to `scratch` (a folder
    the caller owns and removes). A failure there is raised.
    """
    with case_sensitive(spark) as session:
        try:
            schema = _json_reader(session, max_depth).json([glob_escaped(f) for f in files]).schema
        except AnalysisException:
            if scratch is None:
                raise
            strict = read_text_lines(session, files).where(is_strict_json(F.col("line")))
            strict.select("line").write.mode("overwrite").text(scratch)
            schema = _json_reader(session, max_depth).json(glob_escaped(scratch)).schema
    return StructType([field for field in schema.fields if field.name != CORRUPT_RECORD])


def exact_numbers(data_type: DataType) -> DataType:
    """The type with every decimal replaced by string, at any depth.

    The JSON reader infers integers too large for bigint as decimal; they are
    read as their exact text instead, never rounded and never NULL.
    """
    if isinstance(data_type, DecimalType):
        return StringType()
    if isinstance(data_type, StructType):
        return StructType(
            [StructField(f.name, exact_numbers(f.dataType), True) for f in data_type.fields]
        )
    if isinstance(data_type, ArrayType):
        return ArrayType(exact_numbers(data_type.elementType), True)
    return data_type


EMPTY_OBJECT_TEXT = "{}"  # an empty object, as from_json gives it for a string field
# An empty string in JSON text: `""` not preceded by a backslash (an escaped quote
# inside a string). Valid JSON has `""` nowhere else (the key "" is quarantined).
EMPTY_STRING = r'(?<!\\)""'


def empty_strings_as_text(
    spark: SparkSession,
    files: list[str],
    inferred: StructType,
    scratch: str,
    max_depth: int = LineLimits.max_depth,
) -> StructType:
    """`inferred`, corrected where the reader's inference took `""` for null.

    The reader infers `""` as null, so where a path's other values are
    numbers (or booleans, arrays, objects) it infers their type and the
    line with `""` could not be read with it; and it deletes empty structs
    (SPARK-8093), so a key whose values are only `""`, `{}` and null vanished
    with each `""`. The lines holding `""` are inferred again with each `""`
    read as `" "` (a string like any other), all-null keys dropped (see
    `_merged` for how the two inferences meet). Lines with the key `""` are
    left out: they are quarantined, and `" "` could repeat a key there. One
    pass over the text when no line holds `""` (the caller skips it when the
    ledger's read of the files found no `""`). The lines go to `scratch` (a
    folder the caller owns and removes).
    """
    with case_sensitive(spark) as session:
        line = F.col("value")
        text = session.read.text([glob_escaped(f) for f in files])
        with_empty = text.where(F.contains(line, F.lit('""')) & ~line.rlike(EMPTY_KEY))
        reader = _json_reader(session, max_depth).option("dropFieldIfAllNull", True)

        def infer(lines: DataFrame) -> StructType:
            spaced = F.regexp_replace(line, EMPTY_STRING, '" "')
            lines.select(spaced.alias("value")).write.mode("overwrite").text(scratch)
            return reader.json(glob_escaped(scratch)).schema

        try:
            seen = infer(with_empty)
        except AnalysisException:  # a key repeated in one object, as in infer_schema
            seen = infer(with_empty.where(is_strict_json(line)))
    seen = StructType([f for f in seen.fields if f.name != CORRUPT_RECORD])
    return _merged(inferred, seen, in_element=False)  # type: ignore[return-value]


def _merged(kept: DataType, seen: DataType, in_element: bool) -> DataType:
    """`kept` (the first inference) met with `seen` (inferred with `""` as a string).

    - A path that is text in `seen` is text (as `"x"` beside numbers makes it).
    - A key `kept` lacks is added: as `seen` has it where its leaves become
      columns (the record, its objects, the elements of its arrays of
      objects), else as text. Its `{}` parse as the text `{}` (no string
      `"{}"` can be there, or the key would not have vanished), which
      `planning.empty_objects_nulled` makes null.
    - A value kept as JSON text (arrays of objects below an array or an
      element) that would change inside is parsed as text: whole, as sent.
    `in_element`: below the elements of an array of objects.
    """
    if isinstance(kept, StructType) and isinstance(seen, StructType):
        found = {f.name: f.dataType for f in seen.fields}
        fields = [
            StructField(
                f.name,
                _merged(f.dataType, found.pop(f.name), in_element)
                if f.name in found
                else f.dataType,
                True,
            )
            for f in kept.fields
        ]
        added = [
            StructField(name, data_type if _rewritable(data_type, in_element) else StringType())
            for name, data_type in found.items()
        ]
        return StructType(fields + added)
    if isinstance(kept, ArrayType) and isinstance(seen, ArrayType):
        if objects_in_array(kept) and objects_in_array(seen) and not in_element:
            element = _merged(kept.elementType, seen.elementType, True)  # a child table's
            return ArrayType(element, True)
        merged = ArrayType(_merged(kept.elementType, seen.elementType, True), True)
        if holds_struct(kept) and merged != kept:
            return StringType()  # JSON text: as sent, rather than changed inside
        return merged
    if isinstance(seen, StringType):
        return seen
    return kept


def _rewritable(data_type: DataType, in_element: bool) -> bool:
    """Whether every leaf below is a column value (not inside JSON text: arrays of objects
    below the elements of an array of objects, arrays of arrays of objects)."""
    if isinstance(data_type, StructType):
        return all(_rewritable(f.dataType, in_element) for f in data_type.fields)
    if objects_in_array(data_type):
        return not in_element and _rewritable(data_type.elementType, True)  # type: ignore[attr-defined]
    if isinstance(data_type, ArrayType):  # of scalars, or of arrays: no objects below
        return not holds_struct(data_type.elementType)
    return True


def parse_schema(inferred: StructType, known: dict[JsonPath, DataType]) -> StructType:
    """The schema lines are parsed with: the registry's type for each leaf it knows.

    `known` holds, for leaves of this batch that already have a column, the
    column's type, or string where the batch's values conflict with it
    (planning.parse_types): their text, which every later step splits.
    """
    return with_leaf_types(exact_numbers(inferred), known)  # type: ignore[arg-type]


def local_path(uri: Column) -> Column:
    """A `_metadata.file_path` URI (`file:/in/a%20b.json`) as the local path the ledger keeps.

    Hadoop percent-encodes what a URI cannot hold and leaves `+` alone, so
    `+` is protected before `url_decode` (which reads it as a space).
    """
    path = F.regexp_replace(uri, "^file:", "")
    return F.url_decode(F.regexp_replace(path, "[+]", "%2B"))


def read_text_lines(
    spark: SparkSession,
    files: list[str],
    scanned: Sequence[InboxFile] | None = None,
) -> DataFrame:
    """One row per input line: _source_file, _split_start, _row_id, _line_number, line.

    `_split_start` is the byte offset of the piece of the file the line was
    read with (Spark splits large files and packs small ones into one task);
    `_row_id` grows by one from line to line within a piece.

    `files` read directly give `_source_file` as their local path. Links
    made by inbox_links.link_files give, with `scanned` (the linked inbox
    files as the ledger's scan found them, in link order), the inbox path,
    and the lines the ledger accounts for only: from `first_line` in a file
    that grew since its last commit, and no further than the scan's last
    line in a file that grew since the scan (a producer appending while the
    batch runs: its new lines are the next batch's). Those lines carry their
    `_line_number`; it is NULL for every other line (see line_numbers).
    """
    read = spark.read.text([glob_escaped(f) for f in files])
    if scanned is None:
        return _text_lines(read, local_path(F.col("_metadata.file_path")))
    # After the listing above: a size unchanged since the scan is the size Spark lists
    # (an append after this still brings one line: stage_batch's caller stages again).
    grown = grown_since_scan(scanned)
    for path in sorted(grown):
        PROGRESS.warning(f"{path} changed since it was scanned: read to the scan's last line")
    name = F.col("_metadata.file_name")
    last = [f.first_line + f.line_count - 1 if f.path in grown else None for f in scanned]
    lines = _text_lines(read, by_position([f.path for f in scanned], name)).select(
        "*",
        by_position([f.first_line for f in scanned], name).alias("_first_line"),
        by_position(last, name).cast("bigint").alias("_last_line"),
    )
    bounded = (F.col("_first_line") > 1) | F.col("_last_line").isNotNull()
    if not any(f.first_line > 1 for f in scanned) and not grown:
        return lines.drop("_first_line", "_last_line")
    # Numbered by their order in their file, in the job that reads them. Pieces counted
    # by a job of their own were read again by the next one, where a line appended in
    # between to a file read before them in the same task shifted them by one (found by
    # review: a committed line taken again, a scanned one dropped, the count unchanged).
    in_file = Window.partitionBy("_source_file").orderBy("_split_start", "_row_id")
    numbered = lines.where(bounded).withColumn(
        LINE_NUMBER, F.row_number().over(in_file).cast("bigint")
    )
    kept = numbered.where(
        (F.col(LINE_NUMBER) >= F.col("_first_line"))
        & (F.col("_last_line").isNull() | (F.col(LINE_NUMBER) <= F.col("_last_line")))
    )
    whole = lines.where(~bounded)
    return whole.unionByName(kept.select(*lines.columns)).drop("_first_line", "_last_line")


def _text_lines(read: DataFrame, source: Column) -> DataFrame:
    """Spark's text rows as read_text_lines gives them (`source` names the file)."""
    return read.select(
        source.alias("_source_file"),
        F.col("_metadata.file_block_start").alias("_split_start"),
        F.monotonically_increasing_id().alias("_row_id"),
        F.lit(None).cast("bigint").alias(LINE_NUMBER),
        F.col("value").alias("line"),
    )


def grown_since_scan(scanned: Sequence[InboxFile]) -> set[str]:
    """The paths of the files whose size changed since the ledger's scan (or gone)."""
    return {f.path for f in scanned if _size_now(f.path) != f.size}


def changed_since_scan(scanned: Sequence[InboxFile]) -> list[str]:
    """The paths of the files whose scanned bytes are no longer what the scan hashed
    (rewritten, truncated or gone since; an append alone keeps them): lines read from
    them may not be the lines the ledger accounts for. Only a file whose size or
    modification time changed is read again."""
    changed = []
    for f in scanned:
        try:
            stat = os.stat(f.path)
        except FileNotFoundError:
            changed.append(f.path)
            continue
        if (stat.st_size, stat.st_mtime) == (f.size, f.mtime):
            continue
        try:
            same = stat.st_size >= f.size and (
                fingerprint(Path(f.path), size=f.size).checksum == f.checksum
            )
        except (OSError, UnreadableFile):  # a `.gz` replaced by a cut stream, gone since
            same = False  # (found by review: the error named no file)
        if not same:
            changed.append(f.path)
    return changed


def _size_now(path: str) -> int | None:
    """A file's size now (None when it is gone)."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return None


def line_pieces(lines: DataFrame) -> list[tuple[str, int, int, int]]:
    """Per piece of a file (`_source_file`, `_split_start`) of `lines` (as read by
    `read_text_lines`): its first `_row_id` and the lines of the file's earlier
    pieces. One aggregate over two small columns in Spark (a handful of rows per
    file), the running sums here (`lines_before`)."""
    pieces = lines.groupBy("_source_file", "_split_start").agg(
        F.min("_row_id").alias("_first_row"), F.count("*").alias("_lines")
    )
    return lines_before(tuple(row) for row in pieces.collect())


def lines_before(
    pieces: Iterable[tuple[str, int, int, int]],
) -> list[tuple[str, int, int, int]]:
    """(file, split start, first row, lines) per piece -> (file, split start, first row,
    lines of the file's earlier pieces), in file and split order.

    Example:
        >>> lines_before([("a", 100, 7, 5), ("a", 0, 0, 3), ("b", 0, 9, 2)])
        [('a', 0, 0, 0), ('a', 100, 7, 3), ('b', 0, 9, 0)]
    """
    result, file, before = [], None, 0
    for source, start, first, lines in sorted(pieces, key=lambda piece: piece[:2]):
        if source != file:
            file, before = source, 0
        result.append((source, start, first, before))
        before += lines
    return result


def line_numbers(rows: DataFrame, pieces: list[tuple[str, int, int, int]]) -> DataFrame:
    """`rows` (as read by `read_text_lines`) with `_line_number`: a line's row within
    its piece of the file, plus the lines of the file's earlier pieces (`pieces`:
    `line_pieces` of the lines the rows are among). Each piece's offset is a literal
    looked up by the row's piece, so the rows are joined to nothing (a broadcast join
    cost a Spark job in every write). No text is read again. A row that has its number
    already (a line of a grown file) keeps it."""
    keys = [f"{source}\x00{start}" for source, start, _, _ in pieces]
    offsets = [before - first + 1 for _, _, first, before in pieces]
    offset = F.element_at(
        # Typed: an empty batch has no pieces, and an empty literal array no element type.
        F.map_from_arrays(F.lit(keys).cast("array<string>"), F.lit(offsets).cast("array<bigint>")),
        F.concat_ws("\x00", F.col("_source_file"), F.col("_split_start").cast("string")),
    )
    number = F.col("_row_id") + offset
    if LINE_NUMBER in rows.columns:
        number = F.coalesce(F.col(LINE_NUMBER), number)
    return rows.withColumn(LINE_NUMBER, number)


def is_strict_json(line: Column) -> Column:
    """Whether a line is one JSON value and nothing else, by RFC 8259.

    The VARIANT parser refuses repeated keys, lone surrogates and NaN, but,
    like Jackson, stops at the end of the first value and ignores the rest.
    So the line is parsed as the first element of an array whose second
    element is a random token: `[<line>,"<token>"]`. Text after the value
    either breaks the parse, or ends the array early (`]...`), or adds
    elements (`,...`); in each case the second element is not the token,
    unless the line holds the token itself, which is new for every batch
    and never written anywhere. One parse per line (two for the array and
    object wraps this replaced: about 1 s of 6 for 400k lines).
    """
    token = secrets.token_hex(16)
    wrapped = F.try_parse_json(F.concat(F.lit("["), line, F.lit(f',"{token}"]')))
    # The token can be element 1 only if the array got to our suffix right after the value.
    second = F.try_variant_get(wrapped, "$[1]", "string")
    return F.coalesce(second == F.lit(token), F.lit(False))


def rejection_reason(
    line: Column, record: Column, schema: StructType, limits: LineLimits, overflow: Column
) -> Column:
    """Why a line cannot become a raw row, or NULL when it can.

    `record` is the line parsed with `schema` plus the corrupt-record field,
    cast to its positional type (see flatten.positional_type); `overflow`
    is `beyond_double` of the record as parsed (before any rewrite).
    """
    corrupt = record.getField(f"f{len(schema.fields)}")
    return (
        F.when(F.octet_length(line) > limits.max_line_bytes, F.lit("line_too_long"))
        .when(~F.is_valid_utf8(line), F.lit("invalid_utf8"))
        .when(F.trim(line) == "", F.lit("empty_line"))
        .when(
            record.isNull() | corrupt.isNotNull(),
            # The parser refuses a line past max_depth (MAX_NESTING) as it refuses bad JSON.
            F.when(nested_deeper_than(line, limits.max_depth), F.lit("nesting_too_deep"))
            .when(F.try_parse_json(line).isNull(), F.lit("unparseable_json"))
            .when(F.ltrim(line).startswith("{"), F.lit("unreadable_value"))
            .otherwise(F.lit("not_an_object")),
        )
        .when(~is_strict_json(line), F.lit("not_strict_json"))
        # The regex only where `""` occurs: run on every line it cost a fifth of the parse.
        .when(F.contains(line, F.lit('""')) & line.rlike(EMPTY_KEY), F.lit("empty_key"))
        .when(
            deeper_than(record, positional_type(schema), limits.max_depth),
            F.lit("nesting_too_deep"),
        )
        .when(overflow, F.lit("number_out_of_range"))
    )


def nested_deeper_than(line: Column, levels: int) -> Column:
    """Whether JSON text nests more than `levels` objects and arrays, read from its
    brackets outside strings: for a line the parser refused, whose record tells
    nothing. No recursion (a line may nest a thousand levels), and the walk over its
    characters only where more than `levels` brackets open at all."""

    def state(depth: Column, deepest: Column, in_string: Column, escaped: Column) -> Column:
        return F.struct(
            depth.alias("depth"),
            deepest.alias("deepest"),
            in_string.alias("in_string"),
            escaped.alias("escaped"),
        )

    def step(walked: Column, char: Column) -> Column:
        depth, deepest = walked["depth"], walked["deepest"]
        in_string, escaped = walked["in_string"], walked["escaped"]
        quote, no, yes = char == F.lit('"'), F.lit(False), F.lit(True)
        return (
            F.when(in_string, state(depth, deepest, ~quote | escaped, ~escaped & (char == "\\")))
            .when(quote, state(depth, deepest, yes, no))
            .when(char.isin("{", "["), state(depth + 1, F.greatest(deepest, depth + 1), no, no))
            .when(char.isin("}", "]"), state(depth - 1, deepest, no, no))
            .otherwise(walked)
        )

    start = state(F.lit(0), F.lit(0), F.lit(False), F.lit(False))
    deepest = F.aggregate(F.split(line, ""), start, step, lambda walked: walked["deepest"])
    opening = F.length(line) - F.length(F.translate(line, "{[", ""))
    return F.when(opening > levels, deepest > levels).otherwise(F.lit(False))


def beyond_double(line: Column, record: Column, schema: StructType) -> Column:
    """Whether a line holds a number beyond a double's range (`1e400`, `-1e400`).

    Spark's JSON parser reads such a number as +-Infinity before any rule
    sees it: a double leaf holds Infinity, and a leaf parsed as text (or
    JSON text) holds `"Infinity"`, quotes included, as Jackson writes a
    non-finite double back. Strict JSON has no Infinity of its own (the
    token is `not_strict_json`; a double leaf never reads a string), so an
    infinite double is always an overflow. The text mark is confirmed by a
    number in the line that can overflow (BIG_NUMBER): only a line that
    holds both a string ending in `Infinity"` (its quote escaped) and such
    a number, without an overflow, would be quarantined in error.
    """
    positional = positional_type(schema)
    infinity, mark = F.lit(float("inf")), F.lit('Infinity"')
    checks = [
        (F.array_contains(v, infinity) | F.array_contains(v, -infinity))
        if in_array
        else (F.abs(v) == infinity)
        for v, in_array in leaves_of_kind(record, positional, (DoubleType, FloatType))
    ]
    marks = [
        F.array_join(v, "\x00").contains(mark) if in_array else v.contains(mark)
        for v, in_array in leaves_of_kind(record, positional, (StringType,))
    ]
    return _any(checks) | (_any(marks) & line.rlike(BIG_NUMBER))


def _any(checks: list[Column]) -> Column:
    """Whether any of the checks holds (false for none, and where all are NULL)."""
    return F.coalesce(reduce(operator.or_, checks), F.lit(False)) if checks else F.lit(False)


def parse_lines(
    lines: DataFrame,
    schema: StructType,
    limits: LineLimits = LineLimits(),
    counts: Observation | None = None,
    discard: Column | None = None,
    rewrite: Callable[[Column], Column] | None = None,
) -> DataFrame:
    """Parse each line once: adds `_record` (positional struct) and `_reject_reason`.

    Over-long lines are not parsed at all. `counts`, when given, receives the
    `accepted` and `rejected` line counts once the result is first computed.
    `lines` is `read_text_lines`' result. `rewrite` changes each parsed record
    before it is judged (planning.times_as_iso). `discard`, on `_record`,
    rejects the otherwise accepted lines it holds for (`discard_row`).
    """
    with_corrupt = StructType([*schema.fields, StructField(CORRUPT_RECORD, StringType())])
    options = {
        "mode": "PERMISSIVE",
        "columnNameOfCorruptRecord": CORRUPT_RECORD,
        MAX_NESTING: str(limits.max_depth),
    }
    too_long = F.octet_length("line") > limits.max_line_bytes
    parsed = F.from_json("line", with_corrupt, options).cast(positional_type(with_corrupt))
    # Two selects, so the parse is computed once and the reason reads its result.
    parsed_lines = lines.select("*", F.when(~too_long, parsed).alias(RECORD))
    # Judged on the record as parsed: a check on a rewritten leaf would compute its
    # rewrite (the event time's readers) a second time.
    overflow = "_beyond_double"
    parsed_lines = parsed_lines.withColumn(
        overflow, beyond_double(F.col("line"), F.col(RECORD), schema)
    )
    if rewrite is not None:
        parsed_lines = parsed_lines.withColumn(RECORD, rewrite(F.col(RECORD)))
    reason = rejection_reason(F.col("line"), F.col(RECORD), schema, limits, F.col(overflow))
    if discard is not None:
        reason = F.coalesce(reason, F.when(discard, F.lit(DISCARD_ROW_REASON)))
    accepted = F.col(REJECT_REASON).isNull()
    # The observation also fences the parse in: Spark pushes a filter on
    # _reject_reason down through projections, inlining the parse into the
    # filter (each line parsed twice or three times), but not through this.
    return (
        parsed_lines.withColumn(REJECT_REASON, reason)
        .drop(overflow)
        .observe(
            counts or Observation(),
            F.count_if(accepted).alias("accepted"),
            F.count_if(~accepted).alias("rejected"),
        )
    )
