"""A local Spark Thrift server with Spark Connect, in one JVM started from the pip pyspark.

One `spark-submit` of `HiveThriftServer2` with the Spark Connect plugin serves SQL over
Thrift (dbt `--target thrift`, beeline, PyHive) and DataFrames over Spark Connect
(`sc://127.0.0.1:15002`) against one shared catalog. All Spark settings come from
`dynamic_ddl.spark_conf`, so SQL over Thrift behaves like the embedded session.

Everything the server owns lives under one state folder (default `<root>/.local/server`,
a Derby metastore of its own: Derby admits one JVM per `metastore_db`):

    warehouse/  metastore_db/  derby.log  server.log  server.pid  server.json  server.lock
    connect.token

Who may connect: Spark Connect demands a token, new at every start, kept in `connect.token`
(readable by its owner only) and handed to the server in its environment, never on its command
line. The Thrift port binds 127.0.0.1 and authenticates no one (HiveServer2 `NONE`): any
process on this host can run SQL there as any user name. Use it on a single-user host, or put
a server with real authentication (LDAP, Kerberos) behind the thrift target.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from dynamic_ddl import spark_conf

HOST = "127.0.0.1"
THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
STATE_DIR_ENV = "DYNAMIC_DDL_SERVER_STATE_DIR"
MIN_JAVA = 17

LOG_FILE = "server.log"
PID_FILE = "server.pid"
INFO_FILE = "server.json"
LOCK_FILE = "server.lock"
TOKEN_FILE = "connect.token"
# Read by the Spark Connect server and by the pyspark client alike.
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
# pyspark sends a token without TLS only to a host named exactly `localhost`.
CONNECT_HOST = "localhost"

# Servers this Python process started, kept so they are reaped (and no ResourceWarning about a
# still-running subprocess is raised when the Popen object would otherwise be dropped).
_CHILDREN: dict[int, subprocess.Popen] = {}


class ServerError(RuntimeError):
    """A server could not be started or stopped; the message names the fix."""


@dataclass(frozen=True)
class ServerConfig:
    """How to start the server. Ports bind to 127.0.0.1 only."""

    state_dir: Path
    master: str = "local[*]"
    thrift_port: int = 10000
    connect_port: int = 15002
    driver_memory: str = "2g"
    timeout: float = 120.0


@dataclass(frozen=True)
class ServerInfo:
    """A running server, as recorded in `<state_dir>/server.json`.

    `started` is True when this call started the process, False when it was already running
    (a test fixture stops only a server it started).
    """

    pid: int
    host: str
    thrift_port: int
    connect_port: int
    master: str
    state_dir: str
    log_file: str
    started_at: float
    startup_seconds: float | None = None
    started: bool = True

    @property
    def connect_url(self) -> str:
        """The Spark Connect address, e.g. `sc://localhost:15002` (the token goes apart)."""
        return f"sc://{CONNECT_HOST}:{self.connect_port}"

    @property
    def connect_token(self) -> str | None:
        """The token Spark Connect demands from clients, None if its file is gone."""
        return read_token(Path(self.state_dir))

    @property
    def jdbc_url(self) -> str:
        """The HiveServer2 JDBC address for beeline, e.g. `jdbc:hive2://127.0.0.1:10000`."""
        return f"jdbc:hive2://{self.host}:{self.thrift_port}"


@dataclass(frozen=True)
class ServerStatus:
    """What `server_status` found: `running` means alive and both ports accept connections."""

    state_dir: Path
    pid: int | None
    alive: bool
    running: bool
    info: ServerInfo | None


# ---------------------------------------------------------------------------------------------
# Paths and small helpers


def default_server_state_dir() -> Path:
    """The server's state folder: $DYNAMIC_DDL_SERVER_STATE_DIR or <state dir>/server."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return Path(configured).resolve()
    return spark_conf.default_state_dir() / "server"


def log_path(state_dir: Path) -> Path:
    """The server's combined stdout and stderr."""
    return Path(state_dir) / LOG_FILE


def pid_path(state_dir: Path) -> Path:
    """The file holding the pid (also the process group id) of the running server."""
    return Path(state_dir) / PID_FILE


def info_path(state_dir: Path) -> Path:
    """The JSON file with pid, ports and master of the running server."""
    return Path(state_dir) / INFO_FILE


def spark_home() -> Path:
    """The pip pyspark package folder, which holds bin/spark-submit and the jars."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-submit").exists():
        raise ServerError(
            f"{home}/bin/spark-submit not found: the pyspark install is incomplete. "
            "Fix: reinstall it (make setup, or pip install --force-reinstall pyspark)."
        )
    return home


def find_java(env: dict[str, str] | None = None) -> Path:
    """The `java` spark-submit will use ($JAVA_HOME/bin/java, else PATH); checks it is 17+."""
    env = dict(os.environ) if env is None else env
    java_home = env.get("JAVA_HOME")
    if java_home:  # spark-class uses $JAVA_HOME/bin/java whenever JAVA_HOME is set
        candidate = Path(java_home) / "bin" / "java"
        if not candidate.exists():
            raise ServerError(
                f"Java {MIN_JAVA}+ not found: JAVA_HOME={java_home} has no bin/java. "
                "Fix: point JAVA_HOME at a JDK 17+ (or unset it to use `java` on PATH)."
            )
    else:
        found = shutil.which("java", path=env.get("PATH"))
        if found is None:
            raise ServerError(
                f"Java {MIN_JAVA}+ not found: no `java` on PATH and JAVA_HOME is not set. Fix: "
                "install it (Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless) "
                "or set JAVA_HOME."
            )
        candidate = Path(found)
    major = java_major_version(candidate)
    if major is not None and major < MIN_JAVA:
        raise ServerError(
            f"Java {MIN_JAVA}+ not found: {candidate} is Java {major}; Spark 4 needs {MIN_JAVA}+. "
            "Fix: install a newer JDK and point JAVA_HOME (or PATH) at it."
        )
    return candidate


def java_major_version(java: Path) -> int | None:
    """The major version `java -version` reports (8 for "1.8.0"), or None if unreadable."""
    try:
        result = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr + result.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def port_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_free(port: int, host: str = HOST) -> bool:
    """True if a new listener could bind host:port now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def token_path(state_dir: Path) -> Path:
    """The file holding the running server's Spark Connect token (mode 0600)."""
    return Path(state_dir) / TOKEN_FILE


def write_token(state_dir: Path) -> str:
    """Make a new random token and keep it where only its owner can read it."""
    token = secrets.token_urlsafe(32)
    path = token_path(state_dir)
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(token + "\n")
    return token


def read_token(state_dir: Path) -> str | None:
    """The recorded Spark Connect token, or None."""
    try:
        return token_path(state_dir).read_text().strip() or None
    except OSError:
        return None


def log_tail(path: Path, lines: int = 20) -> str:
    """The last `lines` lines of a text file ('' if it does not exist)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# ---------------------------------------------------------------------------------------------
# The command


def server_settings(config: ServerConfig) -> dict[str, str]:
    """Every `--conf` for the server: the project's engine + session settings, then Connect.

    Session settings given as `--conf` become the default of every Thrift and Connect session.
    """
    settings = spark_conf.all_settings(config.state_dir)
    settings.update(
        {
            "spark.plugins": CONNECT_PLUGIN,
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(config.connect_port),
        }
    )
    return settings


def build_command(config: ServerConfig, home: Path) -> list[str]:
    """The spark-submit argument list that starts the server (no shell involved)."""
    command = [
        str(home / "bin" / "spark-submit"),
        "--class",
        THRIFT_SERVER_CLASS,
        "--name",
        "dynamic-ddl-thrift-server",
        "--master",
        config.master,
        "--driver-memory",
        config.driver_memory,
    ]
    for key, value in server_settings(config).items():
        command += ["--conf", f"{key}={value}"]
    command += [
        "--hiveconf",
        f"hive.server2.thrift.bind.host={HOST}",
        "--hiveconf",
        f"hive.server2.thrift.port={config.thrift_port}",
        "spark-internal",
    ]
    return command


def build_env(
    home: Path, base: dict[str, str] | None = None, token: str | None = None
) -> dict[str, str]:
    """The server's environment: the caller's, with SPARK_HOME, SPARK_LOCAL_IP and the
    Connect token set (in the environment, so `ps` does not show it)."""
    env = dict(os.environ) if base is None else dict(base)
    env["SPARK_HOME"] = str(home)
    env["SPARK_LOCAL_IP"] = HOST
    env.pop(TOKEN_ENV, None)
    if token is not None:
        env[TOKEN_ENV] = token
    return env


# ---------------------------------------------------------------------------------------------
# Processes and recorded state


def pid_alive(pid: int) -> bool:
    """True if `pid` is a live (not zombie) process that looks like our server."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path(f"/proc/{pid}")
    if not proc.exists():  # not Linux: trust kill(0)
        return True
    try:
        stat = (proc / "stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        cmdline = (proc / "cmdline").read_bytes()
    except OSError:
        return False
    # A recycled pid belongs to some other program: do not claim (or kill) it.
    return b"spark" in cmdline.lower() or b"java" in cmdline.lower()


def child_exited(pid: int) -> bool:
    """Whether a process started here (spawn_detached) has exited, by its exit status.

    Not by /proc: mid-exec (spark-class becoming java) a live process can read
    an empty cmdline, which pid_alive takes for a recycled pid.
    """
    child = _CHILDREN.get(pid)
    return child.poll() is not None if child is not None else not pid_alive(pid)


def read_pid(state_dir: Path) -> int | None:
    """The pid recorded in the pid file, or None."""
    try:
        return int(pid_path(state_dir).read_text().strip())
    except (OSError, ValueError):
        return None


def read_info(state_dir: Path) -> ServerInfo | None:
    """The recorded server.json, or None if missing or unreadable."""
    try:
        data = json.loads(info_path(state_dir).read_text())
        return ServerInfo(**{**data, "started": False})
    except (OSError, ValueError, TypeError):
        return None


def _write_state(info: ServerInfo) -> None:
    state_dir = Path(info.state_dir)
    pid_path(state_dir).write_text(f"{info.pid}\n")
    data = {k: v for k, v in asdict(info).items() if k != "started"}
    info_path(state_dir).write_text(json.dumps(data, indent=2) + "\n")


def _clear_state(state_dir: Path) -> None:
    for path in (pid_path(state_dir), info_path(state_dir), token_path(state_dir)):
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def _state_lock(state_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on the state folder, so two `up`s never start two JVMs."""
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(state_dir) / LOCK_FILE, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Send `sig` to the process group led by `pid` (the server was started as its leader)."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _reap(pid: int) -> None:
    """Collect `pid` if it is an exited child of this process (so it is not left a zombie)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _CHILDREN[pid]
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def terminate(pid: int, grace: float = 20.0) -> None:
    """SIGTERM the process group of `pid`, wait up to `grace` seconds, then SIGKILL it."""
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            break
        time.sleep(0.2)
    # SIGKILL whatever is left of the group: the leader if it ignored SIGTERM, else stragglers.
    _signal_group(pid, signal.SIGKILL)
    time.sleep(0.1)
    _reap(pid)


# ---------------------------------------------------------------------------------------------
# Public operations


def server_status(state_dir: Path | None = None) -> ServerStatus:
    """Whether the server recorded under `state_dir` is alive, and whether both ports answer."""
    state_dir = Path(state_dir or default_server_state_dir()).resolve()
    pid = read_pid(state_dir)
    info = read_info(state_dir)
    alive = pid is not None and pid_alive(pid)
    running = (
        alive
        and info is not None
        and port_open(info.thrift_port, info.host)
        and port_open(info.connect_port, info.host)
    )
    return ServerStatus(state_dir=state_dir, pid=pid, alive=alive, running=running, info=info)


def wait_until_ready(
    proc: subprocess.Popen | None, pid: int, config: ServerConfig, started: float
) -> None:
    """Poll until both ports accept connections; ServerError if the process dies or time is up."""
    deadline = started + config.timeout
    while True:
        exited = proc.poll() is not None if proc is not None else not pid_alive(pid)
        if exited:
            code = f" with code {proc.returncode}" if proc is not None else ""
            raise ServerError(f"the Spark server (pid {pid}) exited{code} during start-up")
        if port_open(config.thrift_port) and port_open(config.connect_port):
            return
        if time.monotonic() > deadline:
            raise ServerError(
                f"the Spark server (pid {pid}) did not open Thrift port {config.thrift_port} "
                f"and Spark Connect port {config.connect_port} within {config.timeout:g} s "
                "(raise --timeout on a slow machine)"
            )
        time.sleep(0.25)


def spawn_detached(
    command: list[str], log_file: Path, env: dict[str, str], cwd: Path
) -> subprocess.Popen:
    """Start `command` as the leader of a new process group (stopped as one by `terminate`),
    its output in `log_file`; kept in _CHILDREN so it is reaped."""
    with open(log_file, "wb") as log:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    return proc


def _failure(message: str, log_file: Path) -> ServerError:
    tail = log_tail(log_file, 20) or "(empty)"
    return ServerError(f"{message}. See {log_file}; its last lines:\n{tail}")


def _check_ports_free(config: ServerConfig) -> None:
    if not port_free(config.thrift_port):
        raise ServerError(
            f"Thrift port {HOST}:{config.thrift_port} is already in use by another process. "
            "Fix: stop that process, or pick another port, e.g. SPARK_PORT=10001 "
            "(or --thrift-port 10001)."
        )
    if not port_free(config.connect_port):
        raise ServerError(
            f"Spark Connect port {HOST}:{config.connect_port} is already in use by another "
            "process. Fix: stop that process, or pick another port, e.g. "
            "SPARK_CONNECT_PORT=15003 (or --connect-port 15003)."
        )


def start_server(config: ServerConfig) -> ServerInfo:
    """Start the server detached and wait until Thrift and Spark Connect accept connections.

    Returns the running server's info. If the server recorded under `config.state_dir` already
    runs, returns its info with `started=False` and starts nothing. On failure the new process
    is killed and ServerError names the log file and shows its last lines.
    """
    state_dir = Path(config.state_dir).resolve()
    config = replace(config, state_dir=state_dir)
    with _state_lock(state_dir):
        status = server_status(state_dir)
        if status.alive and status.pid is not None:
            if not status.running:  # still starting (or hung): give it the same timeout
                try:
                    wait_until_ready(None, status.pid, config, time.monotonic())
                except ServerError as error:
                    raise _failure(
                        f"{error}; it was started earlier. Fix: make thrift-down, then retry",
                        log_path(state_dir),
                    ) from None
                status = server_status(state_dir)
            if status.info is not None:
                return status.info
        _clear_state(state_dir)  # stale files of a process that is gone

        home = spark_home()
        find_java(build_env(home))
        _check_ports_free(config)
        env = build_env(home, token=write_token(state_dir))

        log_file = log_path(state_dir)
        if log_file.exists():
            log_file.replace(log_file.with_name(LOG_FILE + ".1"))
        command = build_command(config, home)
        started = time.monotonic()
        proc = spawn_detached(command, log_file, env, state_dir)
        info = ServerInfo(
            pid=proc.pid,
            host=HOST,
            thrift_port=config.thrift_port,
            connect_port=config.connect_port,
            master=config.master,
            state_dir=str(state_dir),
            log_file=str(log_file),
            started_at=time.time(),
        )
        _write_state(info)  # recorded at once, so `down` can stop a server still starting
        try:
            wait_until_ready(proc, proc.pid, config, started)
        except BaseException as error:  # includes Ctrl-C: never leave a half-started JVM
            terminate(proc.pid, grace=10.0)
            _clear_state(state_dir)
            if isinstance(error, ServerError):
                raise _failure(str(error), log_file) from None
            raise
        info = replace(info, startup_seconds=round(time.monotonic() - started, 1))
        _write_state(info)
        return info


def stop_server(state_dir: Path | None = None, grace: float = 20.0) -> int | None:
    """Stop the server whose pid is recorded under `state_dir`; returns that pid, or None.

    Sends SIGTERM to its process group, waits up to `grace` seconds, then SIGKILL. Only the
    recorded pid is touched. The pid and info files are removed either way. Takes no lock, so
    it also stops a server another process is still starting (that `up` then fails cleanly).
    """
    state_dir = Path(state_dir or default_server_state_dir()).resolve()
    pid = read_pid(state_dir)
    stopped = None
    if pid is not None and pid_alive(pid):
        terminate(pid, grace=grace)
        stopped = pid
    _clear_state(state_dir)
    return stopped
