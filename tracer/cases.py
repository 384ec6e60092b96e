"""The study's named cases and the checks that turn CLI choices into a RunSpec."""

from __future__ import annotations

import math
import os
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

CORES = os.cpu_count() or 1
CORE_MULTIPLE = 4  # loader processes / threads beyond 4 per core only thrash (and can exhaust memory)


@dataclass(frozen=True)
class Bound:
    """The accepted range of one numeric run option (RunSpec field); every number must be finite."""

    flag: str
    low: float
    high: float
    why: str = ""


# Every numeric run option's range, in one place (issue 11 moves these into tracer/core/options.py).
BOUNDS: dict[str, Bound] = {
    "batch": Bound("--batch", 1, 4096),
    "epochs": Bound("--epochs", 1, 100_000),
    "limit": Bound("--limit", 1, 10_000_000),
    "image_size": Bound("--image-size", 32, 2048, "the models' pooling needs at least 32"),
    "sample_hz": Bound("--sample-hz", 0, 1000, "0 switches sampling off"),
    "timeout_s": Bound("--timeout", 0.001, 30 * 86400),
    "lr": Bound("--lr", 0, 10),
    "momentum": Bound("--momentum", 0, 1),
    "seed": Bound("--seed", 0, 2**32 - 1),
    "workers": Bound("--workers", 0, CORE_MULTIPLE * CORES, f"{CORE_MULTIPLE} per core on this machine"),
    "prefetch": Bound("--prefetch", 0, 1024),
    "threads": Bound("--threads", 1, CORE_MULTIPLE * CORES, f"{CORE_MULTIPLE} per core on this machine"),
}
TOP_BOUND = Bound("--top", 1, 100_000)
VIEW_SIZE_BOUND = Bound("--size", 200, 10_000, "pixels per side")


def check_bound(bound: Bound, value: float) -> None:
    """One line for a value outside its range or not a finite number (NaN passes every < and >)."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or not bound.low <= value <= bound.high:
        why = f" ({bound.why})" if bound.why else ""
        raise UserError(f"{bound.flag} {value}: give a number from {bound.low:g} to {bound.high:g}{why}")


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
    for name, bound in BOUNDS.items():
        value = getattr(spec, name)
        if value is not None:
            check_bound(bound, value)


def dataset_label(dataset: str) -> str:
    return dataset if dataset in SIZES else dataset.rstrip("/").split("/")[-1] or "custom"


def make_run_id(spec: RunSpec) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    label = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in dataset_label(spec.dataset))
    return f"{stamp}-{spec.framework}-{spec.model}-{label}-{spec.device}-b{spec.batch}-{uuid.uuid4().hex[:4]}"
