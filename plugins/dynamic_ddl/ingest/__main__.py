"""CLI of the raw layer (`--project-dir DIR` defaults to this project):

python -m dynamic_ddl.ingest check            is every topic's inbox ready?
python -m dynamic_ddl.ingest topics [--check] write the raw model of every topic
                                              (raw_models.py); --check: only say
                                              what is out of date, exit 1 if any
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dynamic_ddl.ingest.raw_models import sync
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
    parser.add_argument("command", choices=["check", "topics"])
    parser.add_argument("--project-dir", type=Path, default=project_root())
    parser.add_argument("--check", action="store_true", help="topics: write nothing")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            print(check(args.project_dir))
            return 0
        return topics(args.project_dir, args.check)
    except (ConfigError, InboxError) as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2


def topics(project_dir: Path, check_only: bool) -> int:
    """Write (or with `check_only`, check) the topics' raw models; 1 when out of date."""
    report = sync(project_dir, check=check_only)
    for line in report.lines(checked=check_only):
        print(line)
    if check_only and not report.in_sync:
        print(
            "ERROR: python_models/raw/ does not match vars.raw_topics;"
            " run `make topics` (python -m dynamic_ddl.ingest topics).",
            file=sys.stderr,
        )
        return 1
    if report.in_sync:
        print("Raw models match vars.raw_topics.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
