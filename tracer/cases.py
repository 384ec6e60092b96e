"""The study's named cases and the checks that turn CLI choices into a RunSpec."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from tracer import tracing
from tracer.dataset import SIZES
from tracer.errors import UserError
from tracer.frameworks import MODELS, framework_info
from tracer.records import RunSpec


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

DEVICES = ("cpu", "gpu")


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


def check_spec(spec: RunSpec) -> None:
    framework_info(spec.framework)
    if spec.model not in MODELS:
        raise UserError(f"unknown model '{spec.model}': choose one of {', '.join(MODELS)}")
    if spec.device not in DEVICES:
        raise UserError(f"unknown device '{spec.device}': choose cpu or gpu")
    tracing.backend(spec.trace)
    for name in ("batch", "epochs", "image_size"):
        if getattr(spec, name) < 1:
            raise UserError(f"--{name.replace('_', '-')} must be at least 1")
    if spec.limit is not None and spec.limit < 1:
        raise UserError("--limit must be at least 1")
    if spec.image_size < 32:
        raise UserError("--image-size must be at least 32 (the models' pooling needs it)")
    if spec.sample_hz < 0 or spec.sample_hz > 1000:
        raise UserError("--sample-hz must be in [0, 1000] (0 switches sampling off)")
    if spec.timeout_s is not None and spec.timeout_s <= 0:
        raise UserError("--timeout must be positive")


def dataset_label(dataset: str) -> str:
    return dataset if dataset in SIZES else dataset.rstrip("/").split("/")[-1] or "custom"


def make_run_id(spec: RunSpec) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    label = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in dataset_label(spec.dataset))
    return f"{stamp}-{spec.framework}-{spec.model}-{label}-{spec.device}-b{spec.batch}-{uuid.uuid4().hex[:4]}"
