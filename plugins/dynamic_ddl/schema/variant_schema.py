"""Parse the type strings `schema_of_variant_agg` returns into Spark types.

`schema_of_variant_agg(parse_json(line))` infers one batch's schema in the same
pass that parses it, e.g. `OBJECT<id: BIGINT, `a.b`: STRING, tags: ARRAY<STRING>>`.
Keys are kept exactly (case and punctuation); a key whose values disagree in
type comes back as VARIANT, and a key that was only ever null as VOID.
Pure Python: no JVM is needed to read a schema.
"""

from __future__ import annotations

import re

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

SCALARS: dict[str, DataType] = {
    "BIGINT": LongType(),
    "INT": IntegerType(),
    "TINYINT": IntegerType(),
    "SMALLINT": IntegerType(),
    "DOUBLE": DoubleType(),
    "FLOAT": FloatType(),
    "STRING": StringType(),
    "BOOLEAN": BooleanType(),
    "DATE": DateType(),
    "TIMESTAMP": TimestampType(),
    "TIMESTAMP_NTZ": TimestampNTZType(),
    "BINARY": BinaryType(),
    "VARIANT": VariantType(),
    "VOID": NullType(),
}
_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")


class VariantSchemaError(ValueError):
    """A type string this parser does not understand (names the position)."""


def parse_variant_type(text: str) -> DataType:
    """The Spark type of a `schema_of_variant_agg` result.

    Example:
        >>> parse_variant_type("OBJECT<`a.b`: BIGINT, xs: ARRAY<STRING>>").simpleString()
        'struct<a.b:bigint,xs:array<string>>'
    """
    parser = _Parser(text)
    data_type = parser.type()
    parser.skip_spaces()
    if parser.pos != len(text):
        parser.fail("unexpected text after the type")
    return data_type


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> None:
        raise VariantSchemaError(f"{message} at position {self.pos} of {self.text!r}")

    def skip_spaces(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def expect(self, token: str) -> None:
        self.skip_spaces()
        if not self.text.startswith(token, self.pos):
            self.fail(f"expected {token!r}")
        self.pos += len(token)

    def peek(self, token: str) -> bool:
        self.skip_spaces()
        return self.text.startswith(token, self.pos)

    def type(self) -> DataType:
        self.skip_spaces()
        if self.peek("OBJECT<"):
            self.pos += len("OBJECT<")
            return self.object_fields()
        if self.peek("ARRAY<"):
            self.pos += len("ARRAY<")
            element = self.type()
            self.expect(">")
            return ArrayType(element, True)
        decimal = _DECIMAL.match(self.text, self.pos)
        if decimal:
            self.pos = decimal.end()
            return DecimalType(int(decimal.group(1)), int(decimal.group(2)))
        word = re.compile(r"[A-Z_]+").match(self.text, self.pos)
        if not word or word.group(0) not in SCALARS:
            self.fail("unknown type")
        self.pos = word.end()
        return SCALARS[word.group(0)]

    def object_fields(self) -> StructType:
        fields = []
        if self.peek(">"):
            self.pos += 1
            return StructType([])
        while True:
            name = self.name()
            self.expect(":")
            fields.append(StructField(name, self.type(), True))
            if self.peek(","):
                self.pos += 1
                continue
            self.expect(">")
            return StructType(fields)

    def name(self) -> str:
        self.skip_spaces()
        if self.peek("`"):
            self.pos += 1
            chars = []
            while True:
                end = self.text.find("`", self.pos)
                if end < 0:
                    self.fail("unclosed backquote")
                chars.append(self.text[self.pos : end])
                self.pos = end + 1
                if self.text.startswith("`", self.pos):  # `` is a literal backquote
                    chars.append("`")
                    self.pos += 1
                    continue
                return "".join(chars)
        match = re.compile(r"[^\s:`,<>]+").match(self.text, self.pos)
        if not match:
            self.fail("expected a field name")
        self.pos = match.end()
        return match.group(0)
