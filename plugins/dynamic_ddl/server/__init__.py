"""Start, stop and report a local Spark Thrift server with Spark Connect (one JVM, pip pyspark).

CLI: `python -m dynamic_ddl.server up|down|status|token` (or `make thrift-up|thrift-down|...`).
From Python, e.g. a pytest fixture:

    info = start_server(ServerConfig(state_dir=default_server_state_dir()))
    ...  # dbt --target thrift, PyHive on info.thrift_port,
    ...  # Spark Connect on info.connect_url with info.connect_token
    if info.started:
        stop_server(info.state_dir)
"""

from dynamic_ddl.server.local_server import (
    HOST,
    TOKEN_ENV,
    ServerConfig,
    ServerError,
    ServerInfo,
    ServerStatus,
    build_command,
    default_server_state_dir,
    find_java,
    server_status,
    start_server,
    stop_server,
)

__all__ = [
    "HOST",
    "TOKEN_ENV",
    "ServerConfig",
    "ServerError",
    "ServerInfo",
    "ServerStatus",
    "build_command",
    "default_server_state_dir",
    "find_java",
    "server_status",
    "start_server",
    "stop_server",
]
