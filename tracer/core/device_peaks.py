"""The devices' peak FLOP/s and memory bandwidth, declared once, each with where its numbers come from.

Dense figures (no structured sparsity), in FLOP/s and bytes/s. A dtype a device lacks is absent: an fp32
run on a GPU without TF32 is measured against its fp32 peak. Jetson boards have no NVML: their figures
are derived from the datasheet's CUDA cores and maximum GPU clock (2 FLOPs per fused multiply-add) and
are found only where the recorded GPU name names the board. docs/guide/flops.md explains the choice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Dtype(StrEnum):
    FP32 = "fp32"
    TF32 = "tf32"  # fp32 tensors on tensor cores (the frameworks' default for convolutions on Ampere and later)
    FP16 = "fp16/bf16"  # mixed precision (--amp): tensor cores
    FP8 = "fp8"


T = 1e12


@dataclass(frozen=True)
class DevicePeak:
    """One device: the names it is recorded under, its peaks by dtype, its memory bandwidth, their source."""

    label: str
    names: tuple[str, ...]  # NVML's (or the board's) names, matched exactly, lower case
    flops: dict[Dtype, float] = field(default_factory=dict)
    memory_bytes_per_s: float | None = None
    source: str = ""


_H100_SXM = {Dtype.FP32: 66.9 * T, Dtype.TF32: 494.7 * T, Dtype.FP16: 989.4 * T, Dtype.FP8: 1978.9 * T}
_H100_PCIE = {Dtype.FP32: 51.2 * T, Dtype.TF32: 378.0 * T, Dtype.FP16: 756.0 * T, Dtype.FP8: 1513.0 * T}
_A100 = {Dtype.FP32: 19.5 * T, Dtype.TF32: 156.0 * T, Dtype.FP16: 312.0 * T}
_H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (dense: half the sparsity figures)"
_A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (dense)"
_JETSON = "derived from the board's datasheet: CUDA cores x maximum GPU clock x 2 (fused multiply-add)"

DEVICES: tuple[DevicePeak, ...] = (
    DevicePeak("H100 SXM", ("nvidia h100 80gb hbm3",), _H100_SXM, 3.35e12, _H100_SHEET),
    DevicePeak("H100 PCIe", ("nvidia h100 pcie",), _H100_PCIE, 2.0e12, _H100_SHEET),
    DevicePeak("H200 SXM", ("nvidia h200",), _H100_SXM, 4.8e12, "NVIDIA H200 Tensor Core GPU datasheet (dense)"),
    DevicePeak("H800 SXM", ("nvidia h800",), _H100_SXM, 3.35e12, "NVIDIA H800 Tensor Core GPU datasheet (dense)"),
    DevicePeak("H800 PCIe", ("nvidia h800 pcie",), _H100_PCIE, 2.0e12, "NVIDIA H800 PCIe datasheet (dense)"),
    DevicePeak("A100 40GB", ("nvidia a100-sxm4-40gb", "nvidia a100-pcie-40gb"), _A100, 1.555e12, _A100_SHEET),
    DevicePeak("A100 SXM 80GB", ("nvidia a100-sxm4-80gb",), _A100, 2.039e12, _A100_SHEET),
    DevicePeak("A100 PCIe 80GB", ("nvidia a100 80gb pcie",), _A100, 1.935e12, _A100_SHEET),
    DevicePeak(
        "V100 SXM2 (and the DGX Station's)",
        ("tesla v100-sxm2-16gb", "tesla v100-sxm2-32gb", "tesla v100-dgxs-16gb", "tesla v100-dgxs-32gb"),
        {Dtype.FP32: 15.7 * T, Dtype.FP16: 125.0 * T},
        0.9e12,
        "NVIDIA Tesla V100 GPU datasheet",
    ),
    DevicePeak(
        "V100 PCIe",
        ("tesla v100-pcie-16gb", "tesla v100-pcie-32gb"),
        {Dtype.FP32: 14.0 * T, Dtype.FP16: 112.0 * T},
        0.9e12,
        "NVIDIA Tesla V100 GPU datasheet",
    ),
    DevicePeak(
        "L4",
        ("nvidia l4",),
        {Dtype.FP32: 30.3 * T, Dtype.TF32: 60.0 * T, Dtype.FP16: 121.0 * T, Dtype.FP8: 242.5 * T},
        0.3e12,
        "NVIDIA L4 Tensor Core GPU datasheet (dense: half the sparsity figures)",
    ),
    DevicePeak(
        "T4",
        ("tesla t4",),
        {Dtype.FP32: 8.1 * T, Dtype.FP16: 65.0 * T},
        0.32e12,
        "NVIDIA T4 Tensor Core GPU datasheet",
    ),
    DevicePeak(
        "MI300X",
        ("amd instinct mi300x",),
        {Dtype.FP32: 163.4 * T, Dtype.TF32: 653.7 * T, Dtype.FP16: 1307.4 * T, Dtype.FP8: 2614.9 * T},
        5.3e12,
        "AMD Instinct MI300X accelerator datasheet (dense)",
    ),
    DevicePeak("Jetson AGX Orin", ("jetson agx orin",), {Dtype.FP32: 2048 * 1.3e9 * 2}, 204.8e9, _JETSON),
    DevicePeak("Jetson Orin Nano", ("jetson orin nano",), {Dtype.FP32: 1024 * 0.625e9 * 2}, 68e9, _JETSON),
    DevicePeak("Jetson AGX Xavier", ("jetson agx xavier",), {Dtype.FP32: 512 * 1.377e9 * 2}, 136.5e9, _JETSON),
    DevicePeak("Jetson Xavier NX", ("jetson xavier nx",), {Dtype.FP32: 384 * 1.1e9 * 2}, 51.2e9, _JETSON),
    DevicePeak(
        "Jetson TX2",
        ("jetson tx2",),
        {Dtype.FP32: 256 * 1.3e9 * 2, Dtype.FP16: 256 * 1.3e9 * 4},
        59.7e9,
        _JETSON + "; fp16 at twice the fp32 rate (no tensor cores)",
    ),
    DevicePeak(
        "Jetson Nano",
        ("jetson nano",),
        {Dtype.FP32: 128 * 0.9216e9 * 2, Dtype.FP16: 128 * 0.9216e9 * 4},
        25.6e9,
        _JETSON + "; fp16 at twice the fp32 rate (no tensor cores)",
    ),
)


def device(name: str) -> DevicePeak | None:
    """The declared device recorded as `name` (NVML's name, any case; a Jetson board where its name says so)."""
    key = name.strip().lower()
    for d in DEVICES:
        if key in d.names:
            return d
    # A Jetson has no NVML name: its board's name in whatever was recorded (the longest name first).
    boards = sorted((n, d) for d in DEVICES if d.label.startswith("Jetson") for n in d.names)
    return next((d for n, d in sorted(boards, key=lambda b: -len(b[0])) if n in key), None)


def run_dtype(amp: bool, peak: DevicePeak) -> Dtype:
    """The dtype a run's matrix work runs in: fp16/bf16 with --amp; else TF32 on a device that has it (the
    frameworks' convolutions use it by default there), fp32 elsewhere."""
    if amp:
        return Dtype.FP16
    return Dtype.TF32 if Dtype.TF32 in peak.flops else Dtype.FP32
