"""A batch's inbox files as Spark reads them: through links with safe names.

Hadoop takes every path for a URI and a glob pattern: a file named
`a:[b].json` cannot be read by its own name (the colon makes a scheme, the
brackets a pattern), and `_metadata.file_path` comes back percent-encoded.
So each batch reads its files through symbolic links named by position
(`000003.json.gz`, the compression suffix kept) in a folder of its own, and
`_source_file` is the inbox path exactly as the ledger keeps it.

A file holding a line past READ_LINE_LIMIT (which Spark would hold whole in
memory: a 64 MiB line ended a 1 GiB driver) is read through a copy instead,
whose longer lines keep only their first bytes (quarantined as
`line_too_long`): every other line flows, with its own line number.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import Column
from pyspark.sql import functions as F

from dynamic_ddl.catalog import local_path
from dynamic_ddl.ingest import ledger
from dynamic_ddl.ingest.ledger import InboxFile
from dynamic_ddl.ingest.lineage import decoded_chunks, without_bom

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


def link_files(files: Sequence[InboxFile], folder: Path, max_line_bytes: int) -> list[str]:
    """Links `<folder>/<position>.json[.gz]` to the files, made anew; the link paths, in
    order. A file with a line past READ_LINE_LIMIT gets a copy there instead, its longer
    lines cut past `max_line_bytes` (copy_cutting_long_lines)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    links = []
    for position, file in enumerate(files):
        link = folder / f"{position:0{_DIGITS}d}.json{'.gz' * file.path.endswith('.gz')}"
        if file.longest_line > ledger.READ_LINE_LIMIT:
            copy_cutting_long_lines(Path(file.path), file.size, link, max_line_bytes)
        else:
            link.symlink_to(file.path)
        links.append(str(link))
    return links


_PIECES = re.compile(rb"(\r|\n)")


def copy_cutting_long_lines(source: Path, size: int, target: Path, max_line_bytes: int) -> None:
    r"""Copy the lines of the first `size` bytes of `source` to `target`, each line longer
    than READ_LINE_LIMIT cut to its first `max_line_bytes` + 1 to 4 bytes (whole UTF-8
    characters): longer than `max_line_bytes`, it is quarantined as `line_too_long`.

    Line ends are kept, so every line keeps its number; a byte-order mark at the start
    is left out, as Spark's reader leaves it out (found by review: counted in the first
    line, it could leave a cut line short enough to be parsed). A `.gz` is copied
    gzipped (no decompressed copy filling the disk). Memory holds one line's first
    READ_LINE_LIMIT bytes at most.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "a.json").write_bytes(ledger.BOM + "ok\r\n".encode() + "é".encode() * 9)
        >>> saved, ledger.READ_LINE_LIMIT = ledger.READ_LINE_LIMIT, 12
        >>> copy_cutting_long_lines(folder / "a.json", 25, folder / "b.json", max_line_bytes=3)
        >>> ledger.READ_LINE_LIMIT = saved
        >>> (folder / "b.json").read_bytes().decode()  # 7 bytes kept, less the 4th é's half
        'ok\r\nééé'
    """
    keep = max_line_bytes + 4
    enough = max(ledger.READ_LINE_LIMIT + 1, keep)  # bytes that tell a line is cut, and where
    line, cut = bytearray(), False  # the line so far, or its kept bytes once cut
    compressed = source.name.endswith(".gz")
    with gzip.open(target, "wb", compresslevel=1) if compressed else open(target, "wb") as out:
        for text in without_bom(decoded_chunks(source, size)):
            for piece in _PIECES.split(text):
                if piece in (b"\r", b"\n"):
                    out.write(line + piece)
                    line, cut = bytearray(), False
                elif not cut:
                    line += piece[: enough - len(line)]
                    if len(line) >= enough:
                        line, cut = bytearray(whole_characters(bytes(line[:keep]))), True
        out.write(line)


def whole_characters(text: bytes) -> bytes:
    """`text` without a UTF-8 character cut at its end (at most 3 bytes fewer).

    Example:
        >>> whole_characters("aé".encode()[:2]), whole_characters("aé".encode())
        (b'a', b'a\\xc3\\xa9')
    """
    for back in range(1, min(4, len(text)) + 1):
        lead = text[-back]
        if lead & 0xC0 != 0x80:  # not a continuation byte: the last character starts here
            length = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
            return text if back >= length else text[:-back]
    return text


def position(file_name: Column) -> Column:
    """The 0-based position of a link from its file name (`000003.json` -> 3)."""
    return F.regexp_extract(file_name, r"^([0-9]+)\.", 1).cast("int")


def by_position(values: list, file_name: Column) -> Column:
    """The value at a link's position in `values` (a literal array, folded once)."""
    return F.element_at(F.array(*[F.lit(v) for v in values]), position(file_name) + 1)
