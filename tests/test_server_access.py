"""Who may use the local server: Spark Connect demands the token made at its start."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dynamic_ddl.adapter.python_jobs import open_connect_session
from dynamic_ddl.server import TOKEN_ENV


def _select_one(server, token: str | None) -> int:
    session = open_connect_session(server.connect_url, token)
    try:
        return session.sql("select 1 as one").collect()[0]["one"]
    finally:
        session.stop()


def test_spark_connect_refuses_a_client_without_the_token(thrift_server, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)  # pyspark would fall back to it
    for token in (None, "not-the-token"):
        with pytest.raises(Exception, match="(?i)unauthenticated|authenticat|token"):
            _select_one(thrift_server, token)
    assert _select_one(thrift_server, thrift_server.connect_token) == 1


def test_the_token_is_kept_for_its_owner_alone_and_off_the_command_line(thrift_server):
    token_file = Path(thrift_server.state_dir) / "connect.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = thrift_server.connect_token
    assert token and len(token) >= 32
    command_lines = [
        path.read_bytes()
        for path in Path("/proc").glob("[0-9]*/cmdline")
        if path.exists() and _readable(path)
    ]
    assert command_lines and not any(token.encode() in line for line in command_lines)
    printed = subprocess.run(
        [
            sys.executable,
            "-m",
            "dynamic_ddl.server",
            "token",
            "--state-dir",
            str(token_file.parent),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert printed.stdout.strip() == token


def _readable(path: Path) -> bool:
    try:
        path.read_bytes()
    except OSError:
        return False
    return True
