"""Hypothesis strategies for JSON-lines input as feeds really send it: raw text, not dicts.

`json.dumps` of a Python dict can never produce a repeated key, a lone
surrogate escape, `1E400`, `-0`, a byte-order mark, a NUL or a line that
is not UTF-8; these strategies write the text themselves, so they do.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from dynamic_ddl.ingest.topics import JSON_SUFFIXES

# Keys chosen to collide, to look like paths, to need quoting, or to be long.
TRICKY_KEYS = [
    "id",
    "_corrupt_record",  # the name Spark's reader gives a line it cannot parse
    "ts",
    "a",
    "A",
    "a.b",
    "b",
    "x.y",
    "x",
    "y",
    "[]",
    "a[0]",
    "`",
    "'",
    '"',
    "\\",
    "",
    " ",
    "first name",
    "first_name",
    "é",
    "E\u0301",
    "日本",
    "select",
    "_batch_id",
    "$",
    "*",
    "?",
    "{x}",
    "k" * 130,
]
NUMBER_TOKENS = [
    "0",
    "-0",
    "1",
    "-1",
    "1.5",
    "-0.0",
    "1E400",
    "-1e400",
    "1e-400",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "2.5e3",
]
STRING_TOKENS = [
    '""',
    '"x"',
    '"\\u0000"',
    '"\\ud800"',
    '"\\udc00x"',
    '"\\ud83d\\ude00"',
    '"tab\\there"',
    '"quote\\"s"',
    '"2026-11-01T10:00:00Z"',
    '"Sun Aug 31 00:29:15 +0000 2014"',
    '"véhicule 🚁"',
    # Times: ISO 8601 with an offset, the fuzzed topic's time_formats (test_fuzz_ingest),
    # a date no calendar has, and digits beyond microseconds.
    '"2026-11-01 08:30:00+02:00"',
    '"01/11/2026 10:00"',
    '"20261101103000"',
    '"31/02/2026 10:00"',
    '"2026-11-01T10:00:00.1234567Z"',
]


def key_text() -> st.SearchStrategy[str]:
    """A key, JSON-quoted: a tricky one or any short text."""
    keys = st.one_of(st.sampled_from(TRICKY_KEYS), st.text(max_size=6))
    return keys.map(lambda key: json.dumps(key, ensure_ascii=False))


def scalar_text() -> st.SearchStrategy[str]:
    """A scalar as JSON text, the odd ones included."""
    return st.one_of(
        st.sampled_from(["null", "true", "false"]),
        st.sampled_from(NUMBER_TOKENS),
        st.integers(min_value=-(10**20), max_value=10**20).map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.sampled_from(STRING_TOKENS),
        st.text(max_size=12).map(lambda text: json.dumps(text, ensure_ascii=False)),
    )


def value_text() -> st.SearchStrategy[str]:
    """Any JSON value as text: scalars, arrays and objects, nested (keys may repeat)."""
    return st.recursive(
        scalar_text(),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
            object_text(inner),
        ),
        max_leaves=12,
    )


def object_text(values: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """An object of `values`, its keys free to repeat."""
    members = st.lists(st.tuples(key_text(), values), max_size=6)
    return members.map(lambda pairs: "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}")


@st.composite
def record_text(draw) -> str:
    """A record most feeds would send: an object, usually with `id` and `ts` first."""
    body = draw(object_text(value_text()))
    head = []
    if draw(st.booleans()):
        head.append(f'"id":{draw(st.integers(min_value=0, max_value=5))}')
    if draw(st.booleans()):
        head.append('"ts":' + draw(st.sampled_from(STRING_TOKENS + ["1700000000", "null"])))
    if head:
        body = "{" + ",".join(head) + ("," + body[1:] if body != "{}" else "}")
    return body


def line_bytes() -> st.SearchStrategy[bytes]:
    """One line's bytes, without its line end: mostly records, some broken on purpose."""
    record = record_text().map(lambda text: text.encode("utf-8", "surrogatepass"))
    return st.one_of(
        record,
        record,
        record,
        record.map(lambda line: b"\xef\xbb\xbf" + line),  # a byte-order mark
        record.map(lambda line: line + b" trailing"),
        record.map(lambda line: line[: len(line) // 2]),  # cut short
        record.map(lambda line: line.replace(b'"', b"\xff", 1)),  # not UTF-8
        st.sampled_from([b"", b"   ", b"[1, 2]", b'"text"', b"42", b"null", b"{", b"}"]),
        st.sampled_from([b'{"deep":' * 9 + b"1" + b"}" * 9]),
        st.integers(min_value=1, max_value=3).map(lambda n: b'{"pad": "' + b"p" * 4000 * n + b'"}'),
        value_text().map(lambda text: text.encode("utf-8", "surrogatepass")),
    )


def file_name() -> st.SearchStrategy[str]:
    """A name any filesystem allows: brackets, braces, `*`, `?`, spaces, commas, `%`, unicode."""
    alphabet = st.one_of(
        st.sampled_from(list("[]{}*?,% ab=-.'\"`\\é☃#&;!~")),
        st.characters(codec="utf-8", exclude_characters="/\x00", exclude_categories=["Cs"]),
    )
    stem = st.text(alphabet, min_size=1, max_size=20).filter(
        lambda text: not text.startswith((".", "_")) and len(text.encode()) < 200
    )
    return st.tuples(stem, st.sampled_from(JSON_SUFFIXES)).map("".join)


def line_end() -> st.SearchStrategy[bytes]:
    """How lines end: LF, CRLF, or (rarely) a bare CR, as Spark's reader also splits on it."""
    return st.sampled_from([b"\n", b"\n", b"\n", b"\r\n", b"\r"])
