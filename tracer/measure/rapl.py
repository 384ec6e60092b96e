"""CPU package and DRAM energy from RAPL, read through the kernel's powercap files.

`/sys/class/powercap/intel-rapl:N` (a package) and `intel-rapl:N:M` (its core/uncore/dram parts) each
hold `name`, `energy_uj` (a counter in microjoules) and `max_energy_range_uj` (where it wraps to 0).
AMD CPUs expose the same files under the same names (kernel 5.8+). The readings are stored raw; the
wrap-around is undone by `analyzers.figures.energy`, so a reading is one file read per zone and nothing else.
Since Linux 5.10 (CVE-2020-8694) `energy_uj` is readable by root only: that case is named, not hidden.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracer.core import schema
from tracer.core.runfolder import CsvStream

POWERCAP_ROOT = Path("/sys/class/powercap")
RAPL_COLUMNS = schema.RAPL.columns
# Domains that are whole, non-overlapping parts of the machine: core and uncore are inside package.
RAPL_DOMAINS = ("package", "dram", "psys")


@dataclass(frozen=True)
class RaplZone:
    zone: str  # the powercap directory name, e.g. intel-rapl:0:1
    domain: str  # the kernel's `name`, e.g. package-0, dram
    energy_path: Path
    max_energy_range_uj: int


def domain_kind(domain: str) -> str:
    """`package-0` -> `package`; the kind a zone's energy is summed under."""
    return domain.split("-")[0]


class RaplReader:
    """The readable RAPL zones of a machine; `open()` says why there are none."""

    def __init__(self, zones: list[RaplZone]) -> None:
        self.zones = zones

    @staticmethod
    def open(root: Path = POWERCAP_ROOT) -> tuple[RaplReader | None, str]:
        if not root.is_dir():
            return None, f"RAPL: {root} does not exist"
        dirs = sorted(p for p in root.glob("intel-rapl:*") if (p / schema.ENERGY_UJ).exists())
        if not dirs:
            return None, f"RAPL: no intel-rapl zone in {root}"
        zones, unreadable = [], []
        for d in dirs:
            try:
                domain = (d / "name").read_text().strip()
                max_range = int((d / schema.MAX_ENERGY_RANGE_UJ).read_text())
                int((d / schema.ENERGY_UJ).read_text())
            except PermissionError:
                unreadable.append(d.name)
                continue
            except (OSError, ValueError):
                continue
            if domain_kind(domain) in RAPL_DOMAINS:
                zones.append(RaplZone(d.name, domain, d / schema.ENERGY_UJ, max_range))
        if not zones:
            if unreadable:
                return None, f"RAPL: {root}/{unreadable[0]}/energy_uj is readable by root only"
            return None, f"RAPL: no package or dram zone in {root}"
        return RaplReader(zones), "ok"

    def sources(self) -> list[str]:
        return [f"RAPL {z.domain} ({z.zone})" for z in self.zones]

    def append(self, stream: CsvStream, t_ns: int) -> None:
        """One row per zone; a zone that cannot be read this time is skipped (the next read still counts)."""
        for z in self.zones:
            try:
                value = int(z.energy_path.read_text())
            except (OSError, ValueError):
                continue
            stream.append((t_ns, z.zone, z.domain, value, z.max_energy_range_uj))
