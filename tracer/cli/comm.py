"""The collectives table and the straggler summary of a run of several ranks, as `tracer analyze` and
`tracer show` print them (`analyzers.figures.collectives`, `analyzers.figures.straggler`)."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def comm_json(run: Any) -> dict[str, Any]:
    """The run's collectives table and straggler record, for JSON output (empty for one process)."""
    from analyzers.figures.collectives import table
    from analyzers.figures.straggler import straggler

    out: dict[str, Any] = {}
    found = table(run)
    if found is not None:
        out["collectives"] = found.to_json()
    s = straggler(run)
    if s is not None:
        out["straggler"] = s.to_json()
    return out


def print_collectives(run: Any, out: Any) -> None:
    """The collectives table (per rank and kind) and the straggler summary; nothing for one process."""
    from analyzers.figures.collectives import COLUMNS, cells, table
    from analyzers.figures.straggler import straggler, summary_lines

    found = table(run)
    if found is not None:
        grid = Table(
            *(h for _, h in COLUMNS),
            title=f"collectives per rank — n = {found.world_size}; bytes: {found.bytes_from}; busbw by NCCL's formulas",
        )
        for row in found.rows:
            grid.add_row(*cells(row))
        out.print(grid)
    s = straggler(run)
    if s is None or not s.summary:
        return
    grid = Table(
        "rank", "arrived last", "arrived first", "mean lateness (ms)", "last in steps", title="straggler summary"
    )
    for r in s.summary:
        steps = f"{r.last_steps} of {r.steps}" if r.steps else "-"
        grid.add_row(str(r.rank), str(r.last), str(r.first), f"{r.mean_late_s * 1e3:+.3g}", steps)
    out.print(grid)
    for line in summary_lines(s):
        out.print(line, markup=False)
