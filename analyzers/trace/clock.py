"""One clock for every table: Unix-epoch nanoseconds, as the sampler and worker (time.time_ns()) use.

- nsys SQLite: times are ns since the capture started; TARGET_INFO_SESSION_START_TIME.utcEpochNs is
  that start in Unix ns. Without the table (2021-era exports) times stay relative (`relative_ns`).
- Kineto JSON: `ts`/`dur` are microseconds with up to 3 decimals; `baseTimeNanoseconds` turns ts
  into Unix ns. Without it (older traces) times stay relative.
- CUPTI records: `raw/cupti/clock.json` gives the offset the collector measured.
Converting µs floats to ns rounds to the nearest ns, so 0.001 µs steps survive exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

UNIX_NS = "unix_ns"
RELATIVE_NS = "relative_ns"


@dataclass(frozen=True)
class Clock:
    """How to put one source's times on the Unix clock: unix_ns = raw_ns + offset_ns."""

    offset_ns: int
    kind: str  # UNIX_NS or RELATIVE_NS

    def to_json(self) -> dict[str, int | str]:
        return {"clock": self.kind, "offset_ns": self.offset_ns}


def nsys_clock(session_start_utc_ns: int | None) -> Clock:
    if session_start_utc_ns is None:
        return Clock(0, RELATIVE_NS)
    return Clock(int(session_start_utc_ns), UNIX_NS)


def kineto_clock(base_time_ns: int | None) -> Clock:
    if base_time_ns is None:
        return Clock(0, RELATIVE_NS)
    return Clock(int(base_time_ns), UNIX_NS)
