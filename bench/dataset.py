"""Generated clickstream landing data for the benchmark (``pipeline/examples/clickstream/generator.py``).

One dataset per size, generated once and reused (its manifest is kept next to
it and compared with the wanted config). Both sides read the same files.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from epochal.pipeline.examples.clickstream.generator import GeneratorConfig, generate
from epochal.pipeline.examples.clickstream.layout import partition_files, partition_key

START = datetime(2026, 11, 1, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Dataset:
    """``hours`` hour folders of ``events_per_hour`` new events under ``root/landing``."""

    root: Path
    events_per_hour: int
    hours: int
    seed: int = 11

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    @property
    def config(self) -> GeneratorConfig:
        users = max(50, self.events_per_hour // 10)
        files = max(1, self.events_per_hour // 250_000)
        return GeneratorConfig(users=users, events_per_hour=self.events_per_hour, seed=self.seed, files_per_hour=files)

    def partitions(self) -> list[str]:
        return [partition_key(START + timedelta(hours=h)) for h in range(self.hours)]

    def files(self, partition: str) -> list[str]:
        return partition_files(str(self.landing), partition)

    def ensure(self) -> dict:
        """Generate the data unless the same config was generated before; return the manifest's totals."""
        marker = self.root / "manifest.json"
        wanted = {"config": asdict(self.config), "hours": self.hours, "start": START.isoformat()}
        if marker.exists():
            manifest = json.loads(marker.read_text())
            if {k: manifest.get(k) for k in wanted} == wanted:
                return manifest["totals"]
        shutil.rmtree(self.root, ignore_errors=True)
        self.landing.mkdir(parents=True)
        manifest = generate(str(self.landing), START, self.hours, self.config)
        record = wanted | {"totals": manifest.totals(), "lines_per_hour": [h.lines for h in manifest.hours]}
        marker.write_text(json.dumps(record, indent=2))
        return record["totals"]
