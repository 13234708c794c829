"""CLI: python -m dynamic_ddl.server up|down|status|token [options]

`token` prints the running server's Spark Connect token, for
`export SPARK_CONNECT_AUTHENTICATE_TOKEN=$(python -m dynamic_ddl.server token)`.

Exit codes: 0 done (or running, for status), 1 error, 3 not running (status, token).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dynamic_ddl.server.local_server import (
    HOST,
    ServerConfig,
    ServerError,
    default_server_state_dir,
    read_token,
    server_status,
    start_server,
    stop_server,
    token_path,
)

EXIT_NOT_RUNNING = 3


def _env_int(name: str, default: int) -> int:
    """An integer from the environment, or `default` when unset or empty."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"error: {name}={value!r} is not a whole number") from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line; every option defaults from an environment variable."""
    parser = argparse.ArgumentParser(
        prog="python -m dynamic_ddl.server",
        description=(
            f"A local Spark Thrift server with Spark Connect in one JVM, bound to {HOST} only."
        ),
    )
    parser.add_argument("action", choices=["up", "down", "status", "token"])
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="warehouse, metastore, log and pid file "
        "(env DYNAMIC_DDL_SERVER_STATE_DIR; default <state dir>/server)",
    )
    parser.add_argument(
        "--master",
        default=os.environ.get("SPARK_MASTER") or "local[*]",
        help="Spark master (env SPARK_MASTER; default local[*])",
    )
    parser.add_argument(
        "--thrift-port",
        type=int,
        default=_env_int("SPARK_PORT", 10000),
        help="HiveServer2 Thrift port (env SPARK_PORT; default 10000)",
    )
    parser.add_argument(
        "--connect-port",
        type=int,
        default=_env_int("SPARK_CONNECT_PORT", 15002),
        help="Spark Connect port (env SPARK_CONNECT_PORT; default 15002)",
    )
    parser.add_argument(
        "--driver-memory",
        default=os.environ.get("SPARK_DRIVER_MEMORY") or "2g",
        help="driver JVM heap (env SPARK_DRIVER_MEMORY; default 2g)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=float(_env_int("DYNAMIC_DDL_SERVER_TIMEOUT", 120)),
        help="seconds to wait for both ports (env DYNAMIC_DDL_SERVER_TIMEOUT; default 120)",
    )
    args = parser.parse_args(argv)
    for name in ("thrift_port", "connect_port"):
        if not 0 < getattr(args, name) < 65536:
            parser.error(f"--{name.replace('_', '-')} must be between 1 and 65535")
    if args.thrift_port == args.connect_port:
        parser.error("--thrift-port and --connect-port must differ")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    args.state_dir = (args.state_dir or default_server_state_dir()).resolve()
    return args


def up(args: argparse.Namespace) -> int:
    """Start the server unless it runs already; print where it listens."""
    config = ServerConfig(
        state_dir=args.state_dir,
        master=args.master,
        thrift_port=args.thrift_port,
        connect_port=args.connect_port,
        driver_memory=args.driver_memory,
        timeout=args.timeout,
    )
    if not server_status(config.state_dir).alive:
        print(f"Starting Spark Thrift + Connect server ({config.master}) ...", file=sys.stderr)
    info = start_server(config)
    where = (
        f"Thrift on {info.host}:{info.thrift_port}, Spark Connect on {info.connect_url} "
        f"(pid {info.pid}, log {info.log_file})"
    )
    if info.started:
        print(f"{where}\nReady in {info.startup_seconds:.1f} s.")
    else:
        print(f"Already running: {where}")
    print(
        f"Spark Connect demands the token in {token_path(info.state_dir)}; the Makefile "
        "passes it on, elsewhere: export SPARK_CONNECT_AUTHENTICATE_TOKEN=$(python -m "
        "dynamic_ddl.server token)"
    )
    return 0


def down(args: argparse.Namespace) -> int:
    """Stop the recorded server, if any."""
    pid = stop_server(args.state_dir)
    print(f"Stopped the server (pid {pid})." if pid is not None else "Server not running.")
    return 0


def status(args: argparse.Namespace) -> int:
    """Report the server; exit 0 if running, 3 if not."""
    found = server_status(args.state_dir)
    info = found.info
    if found.running and info is not None:
        print(
            f"running: pid {found.pid}, Thrift {info.host}:{info.thrift_port}, "
            f"Spark Connect {info.connect_url}, master {info.master}, "
            f"state dir {found.state_dir}, log {info.log_file}"
        )
        return 0
    if found.alive:
        print(
            f"not running: pid {found.pid} is alive but its ports do not answer yet "
            f"(starting, or hung; see {found.state_dir / 'server.log'}), "
            f"state dir {found.state_dir}"
        )
    else:
        print(f"not running (state dir {found.state_dir})")
    return EXIT_NOT_RUNNING


def token(args: argparse.Namespace) -> int:
    """Print the running server's Spark Connect token; exit 3 if no server runs."""
    found = server_status(args.state_dir)
    secret = read_token(args.state_dir) if found.alive else None
    if secret is None:
        print(f"not running (state dir {found.state_dir})", file=sys.stderr)
        return EXIT_NOT_RUNNING
    print(secret)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    actions = {"up": up, "down": down, "status": status, "token": token}
    try:
        return actions[args.action](args)
    except ServerError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
