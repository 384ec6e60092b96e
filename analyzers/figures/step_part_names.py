"""The names of a step's parts, declared once: their keys, their labels in tables and how a sentence says
them (`tracer diff`, `show`, the report), and the unit of a decomposition (per image or per step)."""

from __future__ import annotations

from analyzers.trace import kernel_classes as kc

DATA_WAIT, COMPUTE, SYNC, HOST = "data_wait", "compute", "sync", "host"
# A PyTorch command's compute split where the probe sees it (tracer/probe/step_parts.py): these four add up to it.
FORWARD, BACKWARD, OPTIMIZER, OTHER = "forward", "backward", "optimizer", "other"
GPU_PREFIX = "gpu:"
PART_LABELS = {
    DATA_WAIT: "waiting for data",
    COMPUTE: "compute (forward, backward, update as the host saw them)",
    SYNC: "synchronising (loss reads)",
    HOST: "host time with the GPU idle (launching, Python, synchronising)",
    FORWARD: "forward and loss (batch handed out to backward())",
    BACKWARD: "backward (inside backward(); DDP's gradient all-reduce too)",
    OPTIMIZER: "optimizer step",
    OTHER: "rest of the step (zero_grad, logging, the loop's own Python)",
}
PART_DOING = {
    DATA_WAIT: "waiting for data",
    COMPUTE: "computing forward, backward and update",
    SYNC: "synchronising (reading the loss)",
    HOST: "on the host with the GPU idle",
    FORWARD: "in the forward pass and loss",
    BACKWARD: "in backward()",
    OPTIMIZER: "in the optimizer step",
    OTHER: "in the rest of the step (outside forward, backward and the optimizer)",
}
"""How a sentence says where time went ("B spends 7 ms more per image waiting for data")."""
ASYNC_COMPUTE_LABEL = "compute (step minus data wait: the framework returns before its work is done)"
WAIT_UNSEEN_LABEL = "the whole step (its data wait not measured)"


def compute_label(asynchronous: bool, unseen: bool) -> str:
    if unseen:
        return WAIT_UNSEEN_LABEL
    return ASYNC_COMPUTE_LABEL if asynchronous else part_label(COMPUTE)


BASIS_STEPS, BASIS_TRACED_STEPS, BASIS_WINDOW = "steady steps", "traced steady steps", "trace window"
PER_IMAGE, PER_STEP = "image", "step"
"""The unit of a decomposition's seconds: per image where the steps record their images, else per step (an
imported trace whose batch is not recorded: `tracer import --batch N` gives it one)."""
NO_IMAGES_NOTE = "its steps record no images (the batch is not recorded): every figure is per step"


def split_compute(compute: float, split: tuple[float, float, float]) -> list[tuple[str, float]]:
    """The steps' compute as forward, backward, optimizer and the rest, adding up to it."""
    forward, backward, optimizer = split
    return [(FORWARD, forward), (BACKWARD, backward), (OPTIMIZER, optimizer), (OTHER, compute - sum(split))]


def part_doing(key: str) -> str:
    if key.startswith(GPU_PREFIX):
        return f"in GPU {kc.label(key.removeprefix(GPU_PREFIX))} kernels"
    return PART_DOING.get(key, f"in {key}")


def part_label(key: str) -> str:
    if key.startswith(GPU_PREFIX):
        return f"GPU {kc.label(key.removeprefix(GPU_PREFIX))}"
    return PART_LABELS.get(key, key)
