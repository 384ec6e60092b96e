"""The study's named cases and data sets, and how a run is named after them."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from tracer.core.errors import UserError
from tracer.core.options import RunSpec

# The study's two generated data sets: name -> number of images.
DATASET_IMAGES = {"small": 791, "big": 6003}


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    dataset: str
    description: str


CASES = {
    c.name: c
    for c in (
        Case("SimpleBig", "alexnet", "big", "AlexNet on the big set (6003 images): a simple model, much data"),
        Case("ComplexSmall", "vgg16", "small", "VGG16 on the small set (791 images): a complex model, little data"),
    )
}


def resolve_case(case: str | None, model: str | None, dataset: str | None) -> tuple[str, str]:
    """A case gives model and dataset; --model/--dataset override either."""
    if case is not None:
        if case not in CASES:
            raise UserError(f"unknown case '{case}': choose one of {', '.join(CASES)}, or give --model and --dataset")
        c = CASES[case]
        return model or c.model, dataset or c.dataset
    if model is None or dataset is None:
        raise UserError("say what to train: --case SimpleBig|ComplexSmall, or both --model and --dataset")
    return model, dataset


def dataset_label(dataset: str) -> str:
    return dataset if dataset in DATASET_IMAGES else dataset.rstrip("/").split("/")[-1] or "custom"


@dataclass(frozen=True, order=True)
class RunKey:
    """Who trained what where: the one identity of a run that a data pair, a table row, a summary and a
    plan cell share (the dataset by its label, so a folder's path and its name are one dataset)."""

    framework: str
    model: str
    dataset: str
    device: str
    batch: int

    @classmethod
    def of(cls, item: Any) -> RunKey:
        """The key of anything that names the five: a RunSpec, a RunSummary, a plan's Cell, a DataPair (batch 0:
        not recorded, an import's; a key, never shown)."""
        return cls(item.framework, item.model, dataset_label(item.dataset), item.device, int(item.batch or 0))


def make_run_id(spec: RunSpec) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    label = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in dataset_label(spec.dataset))
    return f"{stamp}-{spec.framework}-{spec.model}-{label}-{spec.device}-b{spec.batch}-{uuid.uuid4().hex[:4]}"


UNKNOWN_MODEL = "unknown"
"""The model label of an imported trace when the user names none (`tracer import --model`)."""
NO_FRAMEWORK = "unknown"
"""The framework of a command (`tracer profile -- COMMAND`) before, or where, its probe saw none it knows."""
IMPORTED_FRAMEWORK = "imported"
"""The framework label of an imported trace when the user names none and its format names none (`tracer import`)."""
