"""Reference data the generator draws from: the project's seed CSVs."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from dynamic_ddl.spark_conf import project_root


@dataclass(frozen=True)
class Reference:
    """Device models with their firmware versions (oldest first) and country codes."""

    firmware_by_model: dict[str, list[str]]
    countries: list[str]


def load_reference(seeds_dir: Path | None = None) -> Reference:
    """Read seeds/device_models.csv, firmware_releases.csv and country_codes.csv.

    Raises FileNotFoundError naming the folder when a seed is missing.
    """
    seeds_dir = Path(seeds_dir or project_root() / "seeds")
    models = [row["model_code"] for row in _rows(seeds_dir / "device_models.csv")]
    releases = sorted(_rows(seeds_dir / "firmware_releases.csv"), key=lambda r: r["released_on"])
    firmware = {model: [] for model in models}
    for release in releases:
        firmware.setdefault(release["model_code"], []).append(release["firmware_version"])
    countries = [row["country_code"] for row in _rows(seeds_dir / "country_codes.csv")]
    return Reference(firmware_by_model=firmware, countries=countries)


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise FileNotFoundError(
            f"Seed file {path} is missing; the generator reads reference data from it."
        )
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))
