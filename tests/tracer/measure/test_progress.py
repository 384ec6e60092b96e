"""The live view, fed a real run's event stream line by line: a spinner names the framework being
imported before the first epoch, the ETA is the epoch's, and each bar ends full."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from tracer.core.runfolder import RunFolder
from tracer.measure.progress import ProgressView


def _replay(run: RunFolder, tmp_path: Path) -> tuple[ProgressView, list[str]]:
    events = tmp_path / "events.jsonl"
    events.write_text("")
    console = Console(file=io.StringIO(), force_terminal=True, width=120, record=True)
    view = ProgressView(console, events, run.read_record().spec.epochs)
    shown: list[str] = []
    for line in run.events_path.read_text().splitlines():
        with events.open("a") as f:
            f.write(line + "\n")
        view.poll()
        shown.append(" | ".join(str(view._progress.tasks[i].description) for i in range(len(view._progress.tasks))))
    view.close()
    return view, shown


def test_spinner_then_epoch_bars(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    view, shown = _replay(tiny_pytorch_run, tmp_path)
    kinds = [json.loads(ln)["kind"] for ln in tiny_pytorch_run.events_path.read_text().splitlines()]
    first_epoch = kinds.index("epoch_start")
    assert "importing pytorch" in shown[kinds.index("start")]
    assert all("epoch" not in s for s in shown[:first_epoch])
    assert shown[first_epoch].startswith("epoch 1/") and "importing" not in shown[first_epoch]
    (task,) = view._progress.tasks
    assert task.total is not None and task.completed == task.total  # the last bar ended full
    assert task.fields["eta"] == "0:00:00"


def test_eta_is_the_epochs_time_left() -> None:
    view = ProgressView(Console(file=io.StringIO()), Path("/nonexistent/events.jsonl"), epochs=10)
    view._epoch_total = 100
    assert view._eta(images=50, rate=10.0) == "0:00:05"  # 50 images left at 10 img/s, not 9 more epochs
    view.close()
