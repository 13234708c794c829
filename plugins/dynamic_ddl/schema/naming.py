"""Column names for JSON paths: lowercase, sanitized, deterministic and collision-free.

The rule, after the Dynamic DDL talk (`_data.record.state` -> `data_record_state`):

1. Each key is Unicode-normalized (NFKD) and stripped of accents, lowercased;
   every character other than a-z and 0-9 becomes `_`. A non-empty key with
   nothing left (say, in another script) becomes `k` + 6 hex of its hash.
2. Keys are joined with `_`; runs of `_` collapse to one; leading and
   trailing `_` go. An empty result becomes `col`; a leading digit gets `c_`.
3. A name longer than 120 characters is cut and given an 8-hex suffix of
   the path's hash.
4. Collisions (keys differing only in case, `a.b` vs nested `a` -> `b`,
   `first name` vs `first_name`, ...): a path that already has a column keeps
   it; among new paths, in sorted order, the first takes the plain name and
   every later one gets `_<8 hex of sha1(json path)>`. The suffix depends
   only on the path, so it is the same on every run.

Names never start with `_`, so they cannot clash with lineage columns such
as `_batch_id`.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Collection, Iterable, Mapping

MAX_NAME_LENGTH = 120
SUFFIX_LENGTH = 8
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

JsonPath = tuple[str, ...]
ELEMENT_KEY = "[]"  # in a path, "each element of the array": data.media[].type


class UnaddressableKey(ValueError):
    """A key holding both ' and ": Spark's JSON paths have no escapes for it."""


def json_path(path: JsonPath) -> str:
    r"""The path in Spark's variant path syntax, quoting keys that need it.

    Spark's paths have no escapes: a key is quoted with whichever quote it
    does not contain. A key containing both raises UnaddressableKey (callers
    then fall back to another way of addressing it).

    Example:
        >>> json_path(("_data", "a.b", "it's"))
        '$._data[\'a.b\']["it\'s"]'
    """
    parts = ["$"]
    for key in path:
        if _SIMPLE_KEY.match(key):
            parts.append(f".{key}")
        elif "'" not in key:
            parts.append(f"['{key}']")
        elif '"' not in key:
            parts.append(f'["{key}"]')
        else:
            raise UnaddressableKey(f"Key {key!r} has both quote characters.")
    return "".join(parts)


_DISPLAY_SPECIAL = re.compile(r"([\\.\[\]])")


def display_path(path: JsonPath) -> str:
    r"""A readable, always-defined, unique path for registries, overflow maps and messages.

    Keys are joined by dots; a dot, bracket or backslash inside a key is
    escaped with a backslash, so two different paths never read the same
    (the key `x.y` is `x\.y`, the key `y` inside `x` is `x.y`).

    Example:
        >>> display_path(("_data", "media", "[]", "type"))
        '_data.media[].type'
        >>> display_path(("x.y",)), display_path(("x", "y"))
        ('x\\.y', 'x.y')
    """
    keys = ["[]" if key == ELEMENT_KEY else _DISPLAY_SPECIAL.sub(r"\\\1", key) for key in path]
    return ".".join(keys).replace(".[]", "[]")


def path_hash(path: JsonPath) -> str:
    """8 hex characters identifying a path, stable across runs and machines.

    Hashes the path's JSON-path text, or, for a key no JSON path can hold,
    the keys as a JSON list, so every path has one.
    """
    try:
        text = json_path(path)
    except UnaddressableKey:
        text = json.dumps(list(path), ensure_ascii=False)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:SUFFIX_LENGTH]


def _ascii_key(key: str) -> str:
    decomposed = unicodedata.normalize("NFKD", key)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    ascii_key = _NOT_ALNUM.sub("_", stripped.lower())
    if key and not ascii_key.strip("_"):  # e.g. a key in another script: keep it visible
        return "k" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:6]
    return ascii_key


def base_column_name(path: JsonPath) -> str:
    """The plain name for a path, before collisions are resolved.

    Example:
        >>> base_column_name(("_data", "record", "state"))
        'data_record_state'
    """
    name = "_".join(_ascii_key(key) for key in path if key != ELEMENT_KEY)
    name = _NOT_ALNUM.sub("_", name).strip("_") or "col"
    if name[0].isdigit():
        name = f"c_{name}"
    if len(name) > MAX_NAME_LENGTH:
        name = f"{name[: MAX_NAME_LENGTH - SUFFIX_LENGTH - 1].rstrip('_')}_{path_hash(path)}"
    return name


def assign_column_names(
    paths: Iterable[JsonPath],
    existing: Mapping[JsonPath, str] | None = None,
    reserved: Collection[str] = (),
) -> dict[JsonPath, str]:
    """Names for every path: existing assignments kept, new ones collision-free and
    none of the `reserved` names.

    Example:
        >>> names = assign_column_names([("Name",), ("name",)])
        >>> names[("Name",)], names[("name",)]
        ('name', 'name_6ddc845a')
        >>> assign_column_names([("lock",)], reserved={"lock"})
        {('lock',): 'lock_8ae91d64'}
    """
    assigned = dict(existing or {})
    taken = set(assigned.values()) | set(reserved)
    for path in sorted(set(paths) - set(assigned)):
        name = base_column_name(path)
        if name in taken:
            # rstrip: a cut ending in `_` gave `__`, which names a table's protocol
            # tables and child tables, never a column (found by review).
            name = f"{name[: MAX_NAME_LENGTH - SUFFIX_LENGTH - 1].rstrip('_')}_{path_hash(path)}"
        counter = 2
        while name in taken:  # only if two paths share a hash prefix
            name = f"{name}_{counter}"
            counter += 1
        assigned[path] = name
        taken.add(name)
    return assigned
