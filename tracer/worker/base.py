"""The small interface every framework's worker module implements.

A framework module defines `class Trainer(base.Trainer)`; `tracer.worker.main` drives it:
`versions()`, then `build()` (model, optimiser, input pipeline), then `train_epoch()` per epoch.
"""

import abc
from typing import Dict, NamedTuple, Optional

from tracer.worker.nvtx import Nvtx
from tracer.worker.reporting import Reporter
from tracer.worker.workload import ImageList, WorkloadConfig


class ParamCount(NamedTuple):
    trainable: int
    total: int


class EpochStats(NamedTuple):
    images: int
    loss: float


class Trainer(abc.ABC):
    def __init__(self, cfg: WorkloadConfig, images: ImageList, reporter: Reporter) -> None:
        self.cfg = cfg
        self.images = images
        self.reporter = reporter
        self.nvtx = Nvtx()

    @abc.abstractmethod
    def versions(self) -> Dict[str, str]:
        """Framework and key package versions, for run.json."""

    @abc.abstractmethod
    def build(self) -> ParamCount:
        """Build model, loss, optimiser and the framework's native input pipeline."""

    @abc.abstractmethod
    def train_epoch(self, epoch: int) -> EpochStats:
        """One pass over the images; calls `self.reporter.step(...)` after every batch and wraps
        each step in `self.nvtx.range("step N")`."""

    def _workers(self) -> int:
        """--workers, or 0 (the input pipeline runs in the training process) when not given."""
        return self.cfg.workers if self.cfg.workers is not None else 0

    def _amp_dtype(self) -> Optional[str]:
        """What --amp means here: float16 on a GPU, bfloat16 on a CPU; None without --amp."""
        if not self.cfg.amp:
            return None
        return "float16" if self.cfg.device == "gpu" else "bfloat16"

    def knobs(self) -> Dict[str, object]:
        """The framework settings each CLI knob was mapped to, for run.json."""
        return {}
