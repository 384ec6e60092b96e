"""Live progress of a run, read from the worker's event stream: a spinner while the worker imports its
framework and builds the model (TensorFlow's import alone can take 10 s), then a bar per epoch with
images/s and the epoch's ETA, and one plain line per finished epoch (what lands in CI logs and pipes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from tracer.core.divergence import loss_value
from tracer.core.reading import not_regular
from tracer.core.schema import KIND, Event


class _EpochOnly(ProgressColumn):
    """Shows `inner` for an epoch bar (a task with a total), nothing for a spinner (no total)."""

    def __init__(self, inner: ProgressColumn) -> None:
        super().__init__()
        self.inner = inner

    def render(self, task: Task) -> Any:
        return Text("") if task.total is None else self.inner.render(task)


class ProgressView:
    def __init__(self, console: Console, events_path: Path, epochs: int) -> None:
        self.console = console
        self.events_path = events_path
        self.epochs = epochs
        self._offset = 0
        self._partial = ""
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            _EpochOnly(BarColumn()),
            _EpochOnly(MofNCompleteColumn()),
            _EpochOnly(TextColumn("img  {task.fields[rate]:>7.1f} img/s  epoch ETA {task.fields[eta]}")),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: TaskID | None = None
        self._spinner: TaskID | None = None
        self._epoch_start_ns = 0
        self._epoch_total = 0
        self._progress.start()

    def poll(self) -> None:
        for event in self._new_events():
            self._on_event(event)

    def close(self) -> None:
        self.poll()
        self._progress.stop()

    def _new_events(self) -> list[dict[str, Any]]:
        if not_regular(self.events_path):  # a FIFO put there would block the tracer (and its signals) for ever
            return []
        try:
            with self.events_path.open() as f:
                f.seek(self._offset)
                chunk = f.read()
                self._offset = f.tell()
        except (FileNotFoundError, UnicodeDecodeError):
            return []
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = lines.pop()
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def _spin(self, what: str | None) -> None:
        """The one spinner line before the first epoch: `what` the worker is doing now (None: gone)."""
        if self._spinner is not None:
            self._progress.remove_task(self._spinner)
            self._spinner = None
        if what is not None:
            self._spinner = self._progress.add_task(what, total=None)

    def _on_event(self, e: dict[str, Any]) -> None:
        kind = e.get(KIND)
        if kind == Event.START:
            self._spin(f"importing {e.get('framework') or 'the framework'}")
        elif kind == Event.DATASET:
            self._spin("building the model")
        elif kind == Event.MODEL:
            self.console.print(f"model: {e['trainable_params']:,} trainable parameters")
        elif kind == Event.EPOCH_START:
            self._spin(None)
            self._epoch_start_ns = e["t_ns"]
            self._epoch_total = int(e["images_total"])
            if self._task is not None:
                self._progress.remove_task(self._task)
            self._task = self._progress.add_task(
                f"epoch {e['epoch']}/{self.epochs}", total=self._epoch_total, rate=0.0, eta="-"
            )
        elif kind == Event.PROGRESS and self._task is not None:
            images = int(e["images"])
            elapsed = (e["t_ns"] - self._epoch_start_ns) / 1e9
            rate = images / elapsed if elapsed > 0 else 0.0
            self._progress.update(self._task, completed=images, rate=rate, eta=self._eta(images, rate))
        elif kind == Event.EPOCH_END:
            seconds = (e["t_ns"] - self._epoch_start_ns) / 1e9
            rate = e["images"] / seconds if seconds > 0 else 0.0
            if self._task is not None:  # the bar ends full: the epoch is over, whatever its last batch held
                self._progress.update(self._task, completed=self._epoch_total, rate=rate, eta="0:00:00")
            loss, accuracy = loss_value(e), e.get("accuracy")
            learned = f", loss {loss:.4f}" if loss is not None else ""
            learned += f", accuracy {100 * accuracy:.1f} %" if accuracy is not None else ""
            self.console.print(f"epoch {e['epoch']}/{self.epochs}: {seconds:.2f} s, {rate:.1f} img/s{learned}")
        elif kind == Event.DIVERGED:
            then = "training goes on (--on-divergence continue)" if e.get("continued") else "the run stops"
            self.console.print(
                f"[red]loss {e.get('loss')}[/red] at epoch {e.get('epoch')} step {e.get('step')}"
                f" (last finite loss {e.get('last_finite_loss')}, lr {e.get('lr')}): {then}"
            )
        elif kind == Event.ERROR:
            self._spin(None)
            self.console.print(
                f"[red]worker error:[/red] {escape(str(e.get('error', '')))}"
            )  # its text may hold [brackets]

    def _eta(self, images: int, rate: float) -> str:
        """Time left in this epoch (the bar beside it is the epoch's; the run's end is epochs x that)."""
        if rate <= 0:
            return "-"
        return _clock((self._epoch_total - images) / rate)


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
