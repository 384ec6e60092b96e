"""Framework name -> worker module; adding a framework is one new module and one line here."""

import importlib
from typing import Type

from tracer.worker.base import Trainer

WORKER_MODULES = {
    "pytorch": "tracer.worker.frameworks.pytorch",
    "tensorflow": "tracer.worker.frameworks.tensorflow",
    "mxnet": "tracer.worker.frameworks.mxnet",
    "paddle": "tracer.worker.frameworks.paddle",
    "singa": "tracer.worker.frameworks.singa",
    "jax": "tracer.worker.frameworks.jax",
}


def load_trainer(framework: str) -> Type[Trainer]:
    module = importlib.import_module(WORKER_MODULES[framework])
    return module.Trainer  # type: ignore[no-any-return]
