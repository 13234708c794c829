"""The sqlfluff gate skips nothing: a file that fails to template fails the lint, a
large generated file is linted, and the adapter's materializations and the project's
snapshots template."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

SQLFLUFF = Path(sys.executable).with_name("sqlfluff")


@pytest.fixture
def lint_dir():
    """A folder inside the project (so its .sqlfluff applies), git-ignored, removed after."""
    folder = PROJECT_ROOT / ".local" / "lint-check"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def lint(*paths: Path | str) -> tuple[int, dict[str, list[str]]]:
    """`sqlfluff lint` from the project root: exit code, and rule codes per file."""
    result = subprocess.run(
        [str(SQLFLUFF), "lint", *map(str, paths), "--format", "json"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    files = json.loads(result.stdout)
    return result.returncode, {
        Path(f["filepath"]).name: [v["code"] for v in f["violations"]] for f in files
    }


def test_a_file_that_fails_to_template_fails_the_lint(lint_dir):
    (lint_dir / "unknown_macro.sql").write_text("select {{ no_such_macro() }} as a\n")
    (lint_dir / "broken_jinja.sql").write_text("{% if %}\nselect 1 as a\n")
    code, found = lint(lint_dir)
    assert code == 1
    assert "TMP" in found["unknown_macro.sql"] and "TMP" in found["broken_jinja.sql"]


def test_a_large_generated_file_is_linted_not_skipped(lint_dir):
    """Over sqlfluff's default 20,000-byte limit: still linted (its one finding is reported)."""
    padding = "".join(
        f"-- generated line {i:05d}, padding past the size limit\n" for i in range(500)
    )
    big = lint_dir / "generated.sql"
    big.write_text(padding + "SELECT 1 as a\n")
    assert big.stat().st_size > 20_000
    code, found = lint(big)
    assert code == 1 and found["generated.sql"] == ["CP01"]


def test_the_adapter_materializations_template_and_lint_clean():
    """Plain Jinja rejects {% materialization %}; the dbt_jinja templater parses it."""
    folder = "plugins/dynamic_ddl/adapter/dynamic_spark/macros/materializations"
    code, found = lint(folder)
    assert set(found) == {
        "incremental.sql",
        "raw_ingest.sql",
        "snapshot.sql",
        "table.sql",
        "upsert.sql",
    }
    assert code == 0, found


def test_a_snapshot_block_is_linted_as_its_query(lint_dir):
    """Plain Jinja rejects {% snapshot %}; its query is linted as a model's is."""
    (lint_dir / "snp_bad.sql").write_text(
        "{% snapshot snp_bad %}\n{{ config(unique_key='id') }}\n"
        "SELECT id from {{ ref('seed') }}\n{% endsnapshot %}\n"
    )
    code, found = lint(lint_dir, "snapshots")
    assert code == 1 and "CP01" in found["snp_bad.sql"]
    assert found["snp_device_firmware.sql"] == []
