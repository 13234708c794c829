"""The salt that masks personal data, kept out of everything dbt writes.

`mask_pii` (macros/mask_pii.sql) hashes a value with a salt. Rendered as a
literal, the salt would be in compiled SQL, manifest.json, run_results.json,
the docs site and the logs, and serials (`SN` plus 40 random bits) would be
reversible with it. So the SQL names a session variable instead
(`system.session.dynamic_ddl_pii_salt`), which the adapter declares on each
session it opens, on the connection's own handle, past dbt's query log:
from `DYNAMIC_DDL_PII_SALT`, or, on the embedded target only, from a random
salt made once under the state folder, readable by its owner alone.
(Substituting a `${setting}` in the statement text was tried first: the
Thrift server did not substitute it as the embedded session does.)
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from dynamic_ddl.sql_text import string_literal

SALT_ENV = "DYNAMIC_DDL_PII_SALT"
SALT_VARIABLE = "dynamic_ddl_pii_salt"
LOCAL_SALT_FILE = "pii_salt"
# Characters that survive Spark's substitution into a string literal unescaped.
_SALT = re.compile(r"[A-Za-z0-9+/=_.-]{16,}")


def checked_salt(salt: str, origin: str) -> str:
    """The salt, if it is long enough and safe inside a SQL literal; else a ValueError
    naming the fix."""
    if not _SALT.fullmatch(salt):
        raise ValueError(
            f"The personal-data salt from {origin} must be 16 or more letters, digits or"
            " + / = _ . - (e.g. `openssl rand -hex 32`)."
        )
    return salt


def local_salt(state_dir: Path) -> str:
    """The embedded target's salt: made once (random), kept in `<state>/pii_salt`, mode 0600."""
    path = Path(state_dir) / LOCAL_SALT_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first
            pass
        else:
            with os.fdopen(handle, "w") as file:
                file.write(secrets.token_hex(32))
    return checked_salt(path.read_text().strip(), str(path))


def resolve_salt(embedded: bool, state_dir: Path | None) -> str | None:
    """The salt for a target: `DYNAMIC_DDL_PII_SALT`, else the embedded target's local
    salt; None for a server target without one (mask_pii then refuses to build)."""
    configured = os.environ.get(SALT_ENV)
    if configured:
        return checked_salt(configured, SALT_ENV)
    if embedded and state_dir is not None:
        return local_salt(state_dir)
    return None


def declare_salt_sql(salt: str) -> str:
    """The statement that gives a session the salt, as `system.session.<SALT_VARIABLE>`."""
    return (
        f"declare or replace variable {SALT_VARIABLE} string default"
        f" {string_literal(checked_salt(salt, SALT_ENV))}"
    )
