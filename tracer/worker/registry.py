"""The trainer of a run: the worker module that tracer.core.frameworks declares for the framework,
named in worker_config.json (the worker imports nothing of the tool, so it is told, not looked up)."""

import importlib
from typing import Type

from tracer.worker.base import Trainer
from tracer.worker.workload import WorkloadConfig


def load_trainer(cfg: WorkloadConfig) -> Type[Trainer]:
    if not cfg.worker_module:
        raise ImportError("worker_config.json names no worker module for framework %r" % cfg.framework)
    module = importlib.import_module(cfg.worker_module)
    return module.Trainer  # type: ignore[no-any-return]
