"""A batch's inbox files as Spark reads them: through links with safe names.

Hadoop takes every path for a URI and a glob pattern: a file named
`a:[b].json` cannot be read by its own name (the colon makes a scheme, the
brackets a pattern), and `_metadata.file_path` comes back percent-encoded.
So each batch reads its files through symbolic links named by position
(`000003.json.gz`, the compression suffix kept) in a folder of its own, and
`_source_file` is the inbox path exactly as the ledger keeps it.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from pyspark.sql import Column
from pyspark.sql import functions as F

from dynamic_ddl.catalog import local_path

_DIGITS = 6


def link_folder(staging: str) -> Path:
    """Where a batch staged at `staging` keeps its links: beside it on a local disk, else
    in the temp folder (the inbox is a local folder, so its readers share this disk),
    named by the whole location: two schemas' tables of one name, each under its own
    lock, must not share it (found by review).

    Example:
        >>> a = link_folder("s3a://b/w/dev.db/_staging/raw_t")
        >>> a.name, a == link_folder("s3a://b/w/ci.db/_staging/raw_t")
        ('raw_t-ea00d2c3d6fe', False)
    """
    local = local_path(staging)
    if local is not None:
        return Path(f"{local}__links")
    name = staging.rstrip("/").rsplit("/", 1)[-1]
    where = hashlib.sha256(staging.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / "dynamic_ddl_links" / f"{name}-{where}"


def link_files(paths: list[str], folder: Path) -> list[str]:
    """Links `<folder>/<position>.json[.gz]` to `paths`, made anew; the link paths, in order."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    links = []
    for position, path in enumerate(paths):
        suffix = ".json.gz" if path.endswith(".gz") else ".json"
        link = folder / f"{position:0{_DIGITS}d}{suffix}"
        link.symlink_to(path)
        links.append(str(link))
    return links


def position(file_name: Column) -> Column:
    """The 0-based position of a link from its file name (`000003.json` -> 3)."""
    return F.regexp_extract(file_name, r"^([0-9]+)\.", 1).cast("int")


def by_position(values: list, file_name: Column) -> Column:
    """The value at a link's position in `values` (a literal array, folded once)."""
    return F.element_at(F.array(*[F.lit(v) for v in values]), position(file_name) + 1)
