"""The CUDA API split as the study's Figure 3 draws it: functions at or above a share threshold in any of
the compared runs, largest first, the rest summed into one `other` row. One rule for the report's
Figure 3 and the viewer's CUDA panel, so both list the same functions for the same runs."""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

OTHER = "other"
OTHER_THRESHOLD_PCT = 1.0


class Share(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def time_pct(self) -> float: ...


def other_label(threshold_pct: float = OTHER_THRESHOLD_PCT) -> str:
    return f"{OTHER} (< {threshold_pct:g} % each)"


def group_shares(
    shares: Mapping[str, Sequence[Share]], threshold_pct: float = OTHER_THRESHOLD_PCT
) -> tuple[list[str], dict[str, list[float]]]:
    """Functions at or above `threshold_pct` in at least one of the runs, largest first, then
    `OTHER` holding the rest; for each run key, its share of every listed function (summing to 100)."""
    totals: dict[str, float] = {}
    for rows in shares.values():
        for row in rows:
            if row.time_pct >= threshold_pct:
                totals[row.name] = max(totals.get(row.name, 0.0), row.time_pct)
    names = sorted(totals, key=lambda n: (-totals[n], n))
    out: dict[str, list[float]] = {}
    for key, rows in shares.items():
        by_name = {r.name: r.time_pct for r in rows}
        listed = [by_name.get(n, 0.0) for n in names]
        rest = sum(v for n, v in by_name.items() if n not in totals)
        out[key] = listed + [rest]
    has_rest = any(v[-1] > 0 for v in out.values())
    if not has_rest:
        return names, {k: v[:-1] for k, v in out.items()}
    return names + [OTHER], out
