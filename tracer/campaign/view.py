"""Overall progress of a campaign: one bar over its cells (with the runs in flight), and one plain line
per finished run, which is what lands in logs and pipes."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tracer.campaign.plan import Cell
from tracer.campaign.record import OK, CellEntry


class CampaignView:
    def __init__(self, console: Console, name: str, total: int, done: int) -> None:
        self.console = console
        self.total = total
        self.finished = done
        self._running: dict[str, str] = {}
        self._failed = 0
        self._queue = ""
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[now]}"),
            console=console,
            transient=True,
        )
        self._task = self._progress.add_task(f"campaign {name}", total=total, completed=done, now="")
        self._progress.start()

    def started(self, cell: Cell, where: str = "") -> None:
        self._running[cell.cell_id] = cell.label() + (f" @ {where}" if where else "")
        self._refresh()

    def ended(self, cell: Cell, entry: CellEntry, final: bool = True) -> None:
        self._running.pop(cell.cell_id, None)
        if final:
            self.finished += 1
            self._failed += entry.state != OK
        wall = f"{entry.wall_s:.1f} s" if entry.wall_s is not None else "-"
        colour = "green" if entry.state == OK else "red"
        what = entry.status or entry.state
        cause = f": {entry.cause}" if entry.state != OK and entry.cause else ""
        retry = "" if final else " (will retry)"
        self.console.print(
            f"[{self.finished}/{self.total}] {cell.cell_id}: [{colour}]{what}[/{colour}]{cause}{retry} "
            f"in {wall}  {entry.run_id or ''}"
        )
        self._progress.update(self._task, completed=self.finished)
        self._refresh()

    def queue(self, running: int, queued: int) -> None:
        """Where a cluster queues the runs (Slurm): how many run and how many wait, beside the bar."""
        self._queue = f"{running} running, {queued} queued"
        self._refresh()

    def note(self, text: str) -> None:
        self.console.print(text)

    def _refresh(self) -> None:
        now = "; ".join(self._running.values())
        if self._queue:
            failed = f", {self._failed} failed" if self._failed else ""
            now = f"{self._queue}{failed}: {now}"
        self._progress.update(self._task, now=now[:100])

    def close(self) -> None:
        self._progress.stop()
