"""A Spark standalone cluster on this machine: one master and N workers, each its own JVM.

Tasks then run in executor processes the workers launch, apart from the driver, as on
a real cluster. The Thrift + Connect server submits to it when started with
`ServerConfig(master=cluster.master_url)`, or `make thrift-up SPARK_MASTER=spark://...`.
Every process binds to 127.0.0.1, is started as its own process group, and is stopped by
the pid recorded in `<state_dir>/cluster.json`.

    <state_dir>/  cluster.json  master.log  worker-<n>.log  work/   (executors' folders)
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from dynamic_ddl.server.local_server import (
    HOST,
    ServerError,
    _state_lock,
    build_env,
    child_exited,
    find_java,
    log_tail,
    pid_alive,
    port_free,
    port_open,
    spark_home,
    spawn_detached,
    terminate,
)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
INFO_FILE = "cluster.json"
_REGISTERED = re.compile(r"Registering worker ")


@dataclass(frozen=True)
class ClusterConfig:
    """How to start the cluster. Web UIs take free ports (0); only the master port is fixed."""

    state_dir: Path
    master_port: int = 7077
    workers: int = 2
    cores_per_worker: int = 1
    memory_per_worker: str = "2g"
    timeout: float = 120.0


@dataclass(frozen=True)
class ClusterInfo:
    """A running cluster: the master's URL and every pid, master first."""

    master_url: str
    pids: tuple[int, ...]
    state_dir: str


def master_command(home: Path, config: ClusterConfig) -> list[str]:
    """`spark-class` arguments that start the master on 127.0.0.1."""
    return [
        str(home / "bin" / "spark-class"),
        MASTER_CLASS,
        "--host",
        HOST,
        "--port",
        str(config.master_port),
        "--webui-port",
        "0",
    ]


def worker_command(home: Path, config: ClusterConfig, index: int, master_url: str) -> list[str]:
    """`spark-class` arguments that start worker `index`, with its own work folder."""
    return [
        str(home / "bin" / "spark-class"),
        WORKER_CLASS,
        "--host",
        HOST,
        "--cores",
        str(config.cores_per_worker),
        "--memory",
        config.memory_per_worker,
        "--webui-port",
        "0",
        "--work-dir",
        str(Path(config.state_dir) / "work" / f"worker-{index}"),
        master_url,
    ]


def registered_workers(master_log: Path) -> int:
    """How many workers the master's log says registered."""
    try:
        return len(_REGISTERED.findall(master_log.read_text(errors="replace")))
    except OSError:
        return 0


def _wait(ready, pids: list[int], what: str, log_file: Path, deadline: float) -> None:
    """Poll `ready()` until true; ServerError naming the log if a process died or time is up."""
    while not ready():
        dead = [pid for pid in pids if child_exited(pid)]
        if dead or time.monotonic() > deadline:
            reason = f"pid {dead[0]} exited" if dead else "timed out"
            raise ServerError(
                f"the Spark standalone {what} did not start ({reason}). "
                f"See {log_file}; its last lines:\n{log_tail(log_file) or '(empty)'}"
            )
        time.sleep(0.25)


def start_cluster(config: ClusterConfig) -> ClusterInfo:
    """Start the master, then the workers; return once every worker has registered.

    On failure every process started here is stopped and ServerError names the log.
    """
    state_dir = Path(config.state_dir).resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    if not port_free(config.master_port):
        raise ServerError(
            f"Port {HOST}:{config.master_port} is in use. Fix: stop what listens there, "
            "or pass another master_port."
        )
    home = spark_home()
    env = build_env(home)
    find_java(env)
    master_url = f"spark://{HOST}:{config.master_port}"
    deadline = time.monotonic() + config.timeout
    pids: list[int] = []
    with _state_lock(state_dir):
        try:
            master_log = state_dir / "master.log"
            master = spawn_detached(master_command(home, config), master_log, env, state_dir)
            pids.append(master.pid)
            _record(state_dir, master_url, pids)
            _wait(lambda: port_open(config.master_port), pids, "master", master_log, deadline)
            for index in range(1, config.workers + 1):
                command = worker_command(home, config, index, master_url)
                log_file = state_dir / f"worker-{index}.log"
                pids.append(spawn_detached(command, log_file, env, state_dir).pid)
                _record(state_dir, master_url, pids)
            everyone = lambda: registered_workers(master_log) >= config.workers  # noqa: E731
            _wait(everyone, pids, "workers", master_log, deadline)
        except BaseException:  # includes Ctrl-C: never leave half a cluster running
            _stop(pids)
            (state_dir / INFO_FILE).unlink(missing_ok=True)
            raise
    return ClusterInfo(master_url, tuple(pids), str(state_dir))


def stop_cluster(state_dir: Path) -> list[int]:
    """Stop the processes recorded under `state_dir`, workers first; returns their pids."""
    info_file = Path(state_dir).resolve() / INFO_FILE
    try:
        pids = json.loads(info_file.read_text())["pids"]
    except (OSError, ValueError, KeyError):
        return []
    stopped = _stop(pids)
    info_file.unlink(missing_ok=True)
    return stopped


def _stop(pids: list[int]) -> list[int]:
    alive = [pid for pid in reversed(pids) if pid_alive(pid)]
    for pid in alive:
        terminate(pid, grace=10.0)
    return alive


def _record(state_dir: Path, master_url: str, pids: list[int]) -> None:
    """Write every pid as soon as it exists, so a crash here still leaves them stoppable."""
    info = ClusterInfo(master_url, tuple(pids), str(state_dir))
    (state_dir / INFO_FILE).write_text(json.dumps(asdict(info), indent=2) + "\n")


def default_cluster_state_dir() -> Path:
    """`<state dir>/cluster`, next to the server's `<state dir>/server`."""
    from dynamic_ddl import spark_conf

    return spark_conf.default_state_dir() / "cluster"


def main(argv: list[str] | None = None) -> int:
    """`python -m dynamic_ddl.server.standalone up|down` (make cluster-up / cluster-down)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m dynamic_ddl.server.standalone",
        description=f"A Spark standalone master and workers on {HOST}, for `make thrift-up`.",
    )
    parser.add_argument("action", choices=["up", "down"])
    parser.add_argument("--master-port", type=int, default=7077)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    state_dir = default_cluster_state_dir()
    if args.action == "down":
        stopped = stop_cluster(state_dir)
        print(f"Stopped {len(stopped)} process(es): {stopped}" if stopped else "Not running.")
        return 0
    try:
        info = start_cluster(ClusterConfig(state_dir, args.master_port, args.workers))
    except ServerError as error:
        print(f"error: {error}")
        return 1
    print(f"Cluster up: {info.master_url} (pids {list(info.pids)}); logs in {state_dir}")
    print(f"Then: SPARK_MASTER={info.master_url} make thrift-up")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
