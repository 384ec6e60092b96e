"""The worker's side of the event stream: one JSON object per line, flushed as it is written.

The tracer tails this file for progress, and the run folder keeps it as `events.jsonl`.
Times are `time.time_ns()`: the Unix-epoch clock that the sampler and trace ingest also use.
"""

from __future__ import annotations

import json
import time
from typing import Any, Optional

# Event kinds a framework module emits besides the driver's (start, phase, epoch_start, ...):
# `compile`: ahead-of-time compilation of a train step (JAX), state "start" then "end" with `seconds`.
COMPILE = "compile"


class Reporter:
    def __init__(self, path: str, progress_every_s: float = 0.5) -> None:
        self._file = open(path, "a")
        self._progress_every_ns = int(progress_every_s * 1e9)
        self._last_progress_ns = 0

    def emit(self, kind: str, **fields: Any) -> None:
        record = {"kind": kind, "t_ns": time.time_ns()}
        record.update(fields)
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def step(self, epoch: int, images: int, loss: Optional[float]) -> None:
        """Called after every batch; writes a progress event at most every `progress_every_s`."""
        now = time.time_ns()
        if now - self._last_progress_ns < self._progress_every_ns:
            return
        self._last_progress_ns = now
        self.emit("progress", epoch=epoch, images=images, loss=loss)

    def close(self) -> None:
        self._file.close()
