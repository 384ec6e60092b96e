"""The worker's side of the event stream: one JSON object per line, flushed as it is written.

The tracer tails this file for progress, and the run folder keeps it as `events.jsonl`.
Times are `time.time_ns()` (`clock.time_ns`, with a stand-in on Python 3.6): the Unix-epoch clock that
the sampler and trace ingest also use.
"""

import json
import os
from typing import Any, List, Optional

from tracer.worker.clock import time_ns
from tracer.worker.schema import KIND, PROBE_WORKER, STEP_HEADER, T_NS, Event, step_row, strict_json


class Reporter:
    def __init__(self, path: str, progress_every_s: float = 0.5) -> None:
        self._file = open(path, "a")
        self._progress_every_ns = int(progress_every_s * 1e9)
        self._last_progress_ns = 0

    def emit(self, kind: str, **fields: Any) -> None:
        record = {KIND: kind, T_NS: time_ns()}
        record.update(fields)
        self._file.write(json.dumps(strict_json(record), allow_nan=False) + "\n")
        self._file.flush()

    def step(self, epoch: int, images: int, loss: Optional[float]) -> None:
        """Called after every batch; writes a progress event at most every `progress_every_s`."""
        now = time_ns()
        if now - self._last_progress_ns < self._progress_every_ns:
            return
        self._last_progress_ns = now
        self.emit(Event.PROGRESS, epoch=epoch, images=images, loss=loss)

    def close(self) -> None:
        self._file.close()


# The per-step table (samples/steps.csv, then steps.parquet): the one declaration of its columns.
FLUSH_EVERY_ROWS = 256


class StepLog:
    """Rows of STEP_COLUMNS appended to a CSV, written in batches: every FLUSH_EVERY_ROWS rows and at
    each epoch's end, so a crash loses at most the rows of the running epoch's last batch of rows."""

    def __init__(self, path: str, rank: int = 0) -> None:
        self._rank = rank
        folder = os.path.dirname(path)
        if folder and not os.path.isdir(folder):
            os.makedirs(folder)
        self._file = open(path, "a")
        if self._file.tell() == 0:
            self._file.write(STEP_HEADER)
            self._file.flush()
        self._rows: List[str] = []

    def add(
        self, epoch: int, step: int, images: int, start_ns: int, data_wait_s: float, compute_s: float, sync_s: float
    ) -> None:
        self._rows.append(
            step_row(epoch, step, images, start_ns, data_wait_s, compute_s, sync_s, self._rank, PROBE_WORKER)
        )
        if len(self._rows) >= FLUSH_EVERY_ROWS:
            self.flush()

    def flush(self) -> None:
        if self._rows:
            self._file.write("".join(self._rows))
            self._file.flush()
            self._rows = []

    def close(self) -> None:
        self.flush()
        self._file.close()
