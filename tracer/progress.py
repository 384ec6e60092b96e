"""Live progress of a run, read from the worker's event stream: a bar per epoch with images/s and ETA,
and one plain line per finished epoch (which is what lands in CI logs and pipes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from tracer.core.schema import KIND, Event


class ProgressView:
    def __init__(self, console: Console, events_path: Path, epochs: int) -> None:
        self.console = console
        self.events_path = events_path
        self.epochs = epochs
        self._offset = 0
        self._partial = ""
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("img  {task.fields[rate]:>7.1f} img/s  ETA {task.fields[eta]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: TaskID | None = None
        self._epoch_start_ns = 0
        self._epoch_total = 0
        self._durations: list[float] = []
        self._progress.start()

    def poll(self) -> None:
        for event in self._new_events():
            self._on_event(event)

    def close(self) -> None:
        self.poll()
        self._progress.stop()

    def _new_events(self) -> list[dict[str, Any]]:
        try:
            with self.events_path.open() as f:
                f.seek(self._offset)
                chunk = f.read()
                self._offset = f.tell()
        except FileNotFoundError:
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

    def _on_event(self, e: dict[str, Any]) -> None:
        kind = e.get(KIND)
        if kind == "model":
            self.console.print(f"model: {e['trainable_params']:,} trainable parameters")
        elif kind == Event.EPOCH_START:
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
            self._progress.update(self._task, completed=images, rate=rate, eta=self._eta(e["epoch"], images, rate))
        elif kind == Event.EPOCH_END:
            seconds = (e["t_ns"] - self._epoch_start_ns) / 1e9
            self._durations.append(seconds)
            rate = e["images"] / seconds if seconds > 0 else 0.0
            if self._task is not None:
                self._progress.update(self._task, completed=e["images"], rate=rate, eta="-")
            self.console.print(
                f"epoch {e['epoch']}/{self.epochs}: {seconds:.2f} s, {rate:.1f} img/s, loss {e['loss']:.4f}"
            )
        elif kind == "error":
            self.console.print(f"[red]worker error:[/red] {e.get('error', '')}")

    def _eta(self, epoch: int, images: int, rate: float) -> str:
        if rate <= 0:
            return "-"
        this_epoch = (self._epoch_total - images) / rate
        per_epoch = sum(self._durations) / len(self._durations) if self._durations else self._epoch_total / rate
        return _clock(this_epoch + per_epoch * (self.epochs - epoch))


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
