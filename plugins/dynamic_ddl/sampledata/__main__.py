"""CLI: python -m dynamic_ddl.sampledata --out data/inbox --events 2000 --batch 1"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dynamic_ddl.sampledata.generator import GeneratorConfig, generate
from dynamic_ddl.sampledata.reference import load_reference


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m dynamic_ddl.sampledata",
        description="Write deterministic sample JSON-lines files to <out>/<topic>/dt=YYYY-MM-DD/.",
    )
    parser.add_argument("--out", type=Path, default=Path("data/inbox"), help="inbox folder")
    parser.add_argument(
        "--events",
        type=int,
        default=2000,
        help="device events per batch (other topics scale with it)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        help="1 = base shape; 2 and later = drifted shape plus late events",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--gzip", action="store_true", help="write .json.gz files")
    parser.add_argument("--file-events", type=int, default=50_000, help="lines per file at most")
    parser.add_argument(
        "--if-empty",
        action="store_true",
        help="write nothing when <out> holds a file (make data: never beside your own files)",
    )
    args = parser.parse_args(argv)
    if args.events < 1 or args.batch < 1 or args.file_events < 1:
        parser.error("--events, --batch and --file-events must be positive")
    return args


def holds_files(folder: Path) -> bool:
    """Whether `folder` holds a file not hidden (a name starting with `.`), at any depth."""
    return folder.is_dir() and any(
        path.is_file() and not path.name.startswith(".") for path in folder.rglob("*")
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.if_empty and holds_files(args.out):
        # Sample rows written beside a user's own files would be ingested, for good.
        print(f"{args.out.resolve()} holds files already: no sample data written", file=sys.stderr)
        return 0
    config = GeneratorConfig(
        out_dir=args.out.resolve(),
        events=args.events,
        batch=args.batch,
        seed=args.seed,
        gzip=args.gzip,
        file_events=args.file_events,
    )
    print(
        f"Generating batch {config.batch} ({config.events} device events) into {config.out_dir}",
        file=sys.stderr,
    )
    counts = generate(config, load_reference())
    for topic, topic_counts in counts.items():
        print(
            f"{topic}: {topic_counts['lines']} lines ({topic_counts['malformed']} malformed) "
            f"in {topic_counts['files']} files"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
