"""A run's points on the roofline: arithmetic intensity (FLOPs per byte) against achieved FLOP/s, under the
device's compute ceiling (its peak at the run's dtype) and memory ceiling (its bandwidth, both from
`tracer.core.device_peaks`).

Where FLOPs and bytes are both known, never else: the built-in models' layers give both (FLOPs by the
convention of `tracer.core.model_flops`; bytes are the layers' compulsory traffic, each layer reading its
input, weights and output-gradient and writing its output and gradients once, so the intensity is an upper
bound and a point's distance below the memory roof a lower bound of the waste). One point for the whole
step (every run with a rate), and, for a run traced whole with a kernel table, one per kernel class that
runs the counted layers: convolutions (forward, backward data, backward filter) and matrix multiplies.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzers.figures.utilisation import Peak
from analyzers.run.run import Run
from tracer.core.model_flops import Layer, layers
from tracer.core.workload import BuiltinWorkload

DTYPE_BYTES = {"fp32": 4, "tf32": 4, "fp16/bf16": 2, "fp8": 1}
CONV_CLASSES = ("conv_fwd", "conv_bwd_data", "conv_bwd_filter", "conv")
MATMUL_CLASSES = ("matmul",)
STEP = "whole step"


@dataclass(frozen=True)
class RoofPoint:
    run_id: str
    framework: str
    what: str  # STEP, "convolution kernels" or "matrix-multiply kernels"
    intensity: float  # FLOPs per byte
    flops_per_s: float


@dataclass(frozen=True)
class Roofline:
    peak: Peak
    points: tuple[RoofPoint, ...]


def _flops_bytes(counted: list[Layer], batch: int, dtype_bytes: int, model_input: bool) -> tuple[float, float]:
    """Training FLOPs and compulsory bytes of `counted` for one step of `batch` images (`model_input`: its
    first layer reads the images, whose gradient is neither computed nor written)."""
    flops = bytes_ = 0.0
    for i, layer in enumerate(counted):
        first = model_input and i == 0
        flops += 2 * layer.macs * batch * (2 if first else 3)
        activations = batch * (2 * layer.inputs + 2 * layer.outputs + (0 if first else layer.inputs))
        bytes_ += dtype_bytes * (activations + 3 * layer.weights)
    return flops, bytes_


def run_points(run: Run) -> Roofline | None:
    """The run's points (a `Run`, or a bare folder), or None where it has no FLOPs, no peak or no bandwidth."""
    from analyzers.figures.run_summary import summarise

    record = run.read_record()
    u = summarise(run).utilisation
    peak = u.peak
    workload = record.workload
    if not isinstance(workload, BuiltinWorkload) or peak.flops_per_s is None or peak.memory_bytes_per_s is None:
        return None
    spec = workload.spec
    dtype_bytes = DTYPE_BYTES.get(peak.dtype, 4)
    counted = layers(spec.model, spec.image_size, spec.num_classes)
    points = []
    flops, bytes_ = _flops_bytes(counted, spec.batch, dtype_bytes, True)
    if u.achieved_flops_per_s:
        points.append(RoofPoint(record.run_id, spec.framework, STEP, flops / bytes_, u.achieved_flops_per_s))
    points += _class_points(run, record.run_id, spec.framework, counted, spec.batch, dtype_bytes)
    return Roofline(peak, tuple(points)) if points else None


def _class_points(
    run: Run, run_id: str, framework: str, counted: list[Layer], batch: int, dtype_bytes: int
) -> list[RoofPoint]:
    """Convolution and matrix-multiply kernels over the steady epochs of a run traced whole: their share of
    the layers' FLOPs per image over their GPU time per image."""
    from analyzers.figures.phase_cuts import trace_phases
    from analyzers.figures.phases import STEADY
    from analyzers.summaries.kernels import kernel_summary

    steady = trace_phases(run).get(STEADY)
    if run.window is not None or steady is None:
        return []
    epochs = [e for e in run.epochs() if e.epoch in steady.epochs]
    images = sum(e.images for e in epochs)
    rows = kernel_summary(run, steady.start_ns, steady.end_ns)
    if not images or not rows:
        return []
    out = []
    kinds = (("convolution kernels", "conv", CONV_CLASSES), ("matrix-multiply kernels", "linear", MATMUL_CLASSES))
    for what, kind, classes in kinds:
        chosen = [layer for layer in counted if layer.kind == kind]
        ns = sum(r.total_ns for r in rows if r.kernel_class in classes)
        if not chosen or not ns:
            continue
        flops, bytes_ = _flops_bytes(chosen, batch, dtype_bytes, chosen[0] is counted[0])
        out.append(RoofPoint(run_id, framework, what, flops / bytes_, flops / batch * images / (ns / 1e9)))
    return out
