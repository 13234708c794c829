"""CLI: `python -m dynamic_ddl.ingest check [--project-dir DIR]`: is every topic's inbox ready?"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dynamic_ddl.ingest.topics import (
    ConfigError,
    InboxError,
    inbox_path,
    load_project_vars,
    parse_topics,
    topic_files,
)
from dynamic_ddl.spark_conf import project_root


def check(project_dir: Path) -> str:
    """One line per topic with its file count; raises ConfigError or InboxError."""
    project_vars = load_project_vars(project_dir)
    inbox = inbox_path(project_dir, project_vars)
    counts = {name: len(topic_files(inbox, name)) for name in parse_topics(project_vars)}
    return f"Inbox {inbox}: " + ", ".join(f"{name} {n} files" for name, n in counts.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dynamic_ddl.ingest")
    parser.add_argument("command", choices=["check"])
    parser.add_argument("--project-dir", type=Path, default=project_root())
    args = parser.parse_args(argv)
    try:
        print(check(args.project_dir))
    except (ConfigError, InboxError) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
