"""How close a run comes to its device: training FLOPs per step, achieved FLOP/s and model FLOPs
utilisation (MFU) against the device's peak, over the steady steps (the headline) and the whole run.

FLOPs come from one place per kind of run: the built-in models from their layer description
(`tracer.core.model_flops`), a user's command from the step the probe counted (its `flops` event:
FlopCounterMode for PyTorch, XLA's cost analysis for JAX). The
peak: a GPU from the declared table (`tracer.core.device_peaks`), a CPU measured once on its machine
(`tracer.measure.cpu_peak`). Where either is missing the figure says why, never a guess.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from analyzers.figures.utilisation_fields import JSON_FIELDS
from tracer.core import schema
from tracer.core.device_peaks import device, run_dtype
from tracer.core.model_flops import COUNTED, model_flops

if TYPE_CHECKING:  # the records (pydantic) are not loaded by `tracer analyze FILE`'s direct summary
    from tracer.core.records import RunRecord

NOT_COUNTED = "not counted"
ANALYTIC = f"analytic (torchvision's layers; {COUNTED})"


NO_GPU_NAMED = "not known: the run recorded no GPU name"


@dataclass(frozen=True)
class Peak:
    """The peak a run is measured against: all the devices it used together, at the dtype it ran in."""

    flops_per_s: float | None = None
    dtype: str = ""
    source: str = "not known"
    memory_bytes_per_s: float | None = None  # the roofline's memory ceiling (GPUs from the table)
    devices: int = 1
    nominal_flops_per_s: float | None = None  # a CPU's nominal figure, beside the measured one
    nominal_source: str = ""


@dataclass(frozen=True)
class RankUtilisation:
    rank: int
    achieved_flops_per_s: float | None
    mfu: float | None


@dataclass(frozen=True)
class Utilisation:
    flops_per_image: float | None = None
    flops_per_step: float | None = None
    flops_source: str = NOT_COUNTED
    peak: Peak = Peak()
    achieved_flops_per_s: float | None = None  # the steady steps
    mfu: float | None = None  # a fraction of 1, over the steady steps
    whole_achieved_flops_per_s: float | None = None  # every epoch, warm-up included
    whole_mfu: float | None = None
    by_rank: tuple[RankUtilisation, ...] = ()

    @property
    def mfu_pct(self) -> float | None:
        """MFU in % of the peak, as `compare` shows it beside the other percentages."""
        return None if self.mfu is None else 100 * self.mfu

    def to_json(self) -> dict[str, object]:
        """The fields `analyze --format json` and the gate read (JSON_FIELDS names and explains them)."""
        values: dict[str, object] = {
            "flops_per_image": self.flops_per_image,
            "flops_per_step": self.flops_per_step,
            "flops_source": self.flops_source,
            "achieved_flops_per_s": self.achieved_flops_per_s,
            "peak_flops_per_s": self.peak.flops_per_s,
            "peak_dtype": self.peak.dtype,
            "peak_source": self.peak.source,
            "peak_nominal_flops_per_s": self.peak.nominal_flops_per_s,
            "mfu": self.mfu,
            "whole_achieved_flops_per_s": self.whole_achieved_flops_per_s,
            "whole_mfu": self.whole_mfu,
            "mfu_by_rank": [
                {schema.RANK: r.rank, "achieved_flops_per_s": r.achieved_flops_per_s, "mfu": r.mfu}
                for r in self.by_rank
            ],
        }
        assert set(values) == set(JSON_FIELDS)
        return values


def step_flops(
    record: RunRecord, events: Sequence[dict[str, object]], raw_trace: Path | None = None
) -> tuple[float | None, float | None, str]:
    """FLOPs per image and per step of one rank, and how they were counted (or why they were not)."""
    from tracer.core.workload import BuiltinWorkload, CommandWorkload

    workload = record.workload
    if isinstance(workload, BuiltinWorkload):
        spec = workload.spec
        try:
            per_image = float(model_flops(spec.model, spec.image_size, spec.num_classes).training)
        except (KeyError, ValueError) as e:
            return None, None, f"{NOT_COUNTED}: {e}"
        return per_image, per_image * spec.batch, ANALYTIC
    if isinstance(workload, CommandWorkload):
        counted = [e for e in events if e.get(schema.KIND) == schema.Event.FLOPS]
        if not counted:
            return (
                None,
                None,
                (
                    f"{NOT_COUNTED}: the probe counted no training step (it counts a PyTorch script's second"
                    " optimizer step, and a JAX script's jitted calls in its second step)"
                ),
            )
        last = counted[-1]
        flops = last.get(schema.FLOPS_PER_STEP)
        if not isinstance(flops, int | float) or flops <= 0:
            return None, None, f"{NOT_COUNTED}: {last.get(schema.FLOPS_NOT_COUNTED) or 'the counter found none'}"
        return None, float(flops), f"counted by the probe: {last.get(schema.FLOPS_COUNTER)}"
    return _imported_flops(raw_trace)


def _imported_flops(raw_trace: Path | None) -> tuple[float | None, float | None, str]:
    """An imported Kineto trace's FLOPs per step from its recorded shapes (analyzers.figures.op_flops)."""
    from analyzers.figures.op_flops import trace_flops

    if raw_trace is None:
        return None, None, f"{NOT_COUNTED}: only a PyTorch-profiler trace recorded with shapes is counted"
    if not raw_trace.name.endswith((".json", ".json.gz")):
        return None, None, f"{NOT_COUNTED}: {_kernels_verdict(raw_trace.parent.parent)}"
    try:
        found = trace_flops(raw_trace)
    except (OSError, ValueError) as e:
        return None, None, f"{NOT_COUNTED}: {raw_trace.name} could not be read ({e})"
    if found is None or found.flops_per_step is None:
        return None, None, f"{NOT_COUNTED}: the trace has no profiler steps with recorded shapes (record_shapes=True)"
    if found.not_counted:
        return (
            None,
            None,
            (
                f"{NOT_COUNTED}: {found.not_counted} attention or convolution operators in its steps have no countable"
                " shapes (strides need the Concrete Inputs of a newer PyTorch; packed variable-length attention"
                " and transposed convolutions are not counted)"
            ),
        )
    return (
        None,
        found.flops_per_step,
        f"from the trace's recorded shapes ({found.counted} operators in {found.steps} steps)",
    )


def of_unnamed_trace(kernel_names: Iterable[str]) -> Utilisation:
    """The utilisation of an imported trace of kernels that names no GPU and has no steps (an nsys export),
    from its distinct kernel names: what its import's run gives, for `tracer analyze FILE`'s direct summary,
    which reads no run."""
    from analyzers.figures.kernel_flops import names_verdict

    source = f"{NOT_COUNTED}: {names_verdict(kernel_names)}"
    return Utilisation(None, None, source, Peak(source=NO_GPU_NAMED))


def device_peak(record: RunRecord) -> Peak:
    """The peak of what the run used: the table's GPU at the run's dtype times the ranks' GPUs, or the CPU's
    measured peak on the machine it ran on."""
    env, spec = record.environment, record.spec
    if record.measurement.device != "cpu":
        if not env.gpus:
            return Peak(source=NO_GPU_NAMED)
        name = env.gpus[0].name
        found = device(name)
        if found is None:
            return Peak(source=f"not known: {name} is not in the device table (tracer/core/device_peaks.py)")
        # a command's or an import's precision is not recorded: the peak is read at the framework's default
        dtype = run_dtype(spec.amp if spec else False, found)
        per_device = found.flops.get(dtype)
        if per_device is None:
            return Peak(dtype=dtype.value, source=f"not known: no {dtype.value} figure for {found.label}")
        n = max(1, record.world_size)
        return Peak(
            per_device * n, dtype.value, f"{found.label} {dtype.value}: {found.source}", found.memory_bytes_per_s, n
        )
    from tracer.measure import cpu_peak

    key = cpu_peak.machine_key(env.cpu_model, env.cpu_logical_cores, env.hostname)
    measured = cpu_peak.cached(key)
    if measured is None and env.hostname == socket.gethostname():
        measured = cpu_peak.measure(key)
    if measured is None:
        return Peak(source=f"not measured: the run's machine ({env.hostname}) is not this one")
    return Peak(
        measured.measured_flops_per_s,
        "fp32",
        f"measured on {env.hostname}: {measured.method} ({measured.measured_at})",
        nominal_flops_per_s=measured.nominal_flops_per_s,
        nominal_source=measured.nominal_source,
    )


def utilisation(
    record: RunRecord,
    events: Sequence[dict[str, object]],
    steady_images_per_s: float | None,
    whole_images_per_s: float | None,
    steady_step_ms: float | None,
    rank_step_s: Sequence[tuple[int, float | None]] = (),
    raw_trace: Path | None = None,
) -> Utilisation:
    """The run's FLOPs, achieved FLOP/s and MFU: built-in runs from their images/s (rank 0's, times the ranks),
    commands from their steady step time; per rank from each rank's mean step."""
    per_image, per_step, source = step_flops(record, events, raw_trace)
    peak = device_peak(record)

    def rate(images_per_s: float | None) -> float | None:
        # The epochs' images are rank 0's: every rank trains a shard as large, so the run does world_size times.
        if per_image is not None and images_per_s:
            return per_image * images_per_s * record.world_size
        return None

    steady = rate(steady_images_per_s)
    if steady is None and per_image is None and per_step is not None and steady_step_ms:
        steady = per_step * record.world_size / (steady_step_ms / 1000)
    if steady is None and per_step is not None and record.imported and raw_trace is not None:
        from analyzers.figures.op_flops import trace_flops

        found = trace_flops(raw_trace)  # read once above (cached): its profiler steps' mean time
        steady = per_step / found.step_s if found is not None and found.step_s > 0 else None
    whole = rate(whole_images_per_s)
    single = peak.flops_per_s / peak.devices if peak.flops_per_s else None
    ranks = tuple(
        RankUtilisation(
            r, per_step / s if per_step and s else None, _frac(per_step / s if per_step and s else None, single)
        )
        for r, s in rank_step_s
    )
    return Utilisation(
        per_image,
        per_step,
        source,
        peak,
        steady,
        _frac(steady, peak.flops_per_s),
        whole,
        _frac(whole, peak.flops_per_s),
        ranks,
    )


def _kernels_verdict(folder: Path) -> str:
    """Why an imported trace of kernels (nsys, CUPTI) is not counted, from its run folder's kernel names
    (analyzers.figures.kernel_flops); a trace without kernels has none to count."""
    import pyarrow.parquet as pq

    from analyzers.figures.kernel_flops import names_verdict
    from analyzers.trace import tables as t

    path = folder / f"{t.KERNELS}.parquet"
    names = pq.read_table(path, columns=["name"]).column("name").unique().to_pylist() if t.present_file(path) else []
    return names_verdict(str(n) for n in names if n is not None)


def _frac(achieved: float | None, peak: float | None) -> float | None:
    return achieved / peak if achieved is not None and peak else None


def percent(mfu: float | None) -> str:
    """MFU as people read it: '31 %', '0.42 %' (two significant figures below 1 %), '-' where not known."""
    if mfu is None:
        return "-"
    pct = 100 * mfu
    if pct >= 9.5:
        return f"{pct:.0f} %"
    return f"{pct:.1f} %" if pct >= 1 else f"{pct:.2g} %"


def flops_text(value: float | None, unit: str = "FLOP") -> str:
    """'4.1 GFLOP', '12.3 TFLOP/s' (unit as given), '-' where not known."""
    if value is None:
        return "-"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def sentence(u: Utilisation) -> str:
    """One line: 'MFU 0.42 % (achieved 1.2 TFLOP/s of 494.7 TFLOP/s, H100 SXM tf32 ...)'."""
    if u.flops_per_step is None:
        return f"MFU: {u.flops_source}"
    if u.peak.flops_per_s is None:
        achieved = flops_text(u.achieved_flops_per_s, "FLOP/s")
        return f"FLOPs {flops_text(u.flops_per_step)} a step; achieved {achieved}; MFU: peak {u.peak.source}"
    return (
        f"MFU {percent(u.mfu)} (steady: {flops_text(u.achieved_flops_per_s, 'FLOP/s')} of "
        f"{flops_text(u.peak.flops_per_s, 'FLOP/s')}; {flops_text(u.flops_per_step)} a step; peak {u.peak.source})"
    )


def rows(u: Utilisation) -> list[tuple[str, str]]:
    """The summary's rows (`tracer profile`, `tracer show`): FLOPs, the peak, MFU steady, whole run, by rank."""
    if u.flops_per_step is None:
        return [("FLOPs per step (training)", u.flops_source)]
    image = f" ({flops_text(u.flops_per_image)} an image)" if u.flops_per_image is not None else ""
    out = [("FLOPs per step (training)", f"{flops_text(u.flops_per_step)}{image}; {u.flops_source}")]
    peak = u.peak
    if peak.flops_per_s is None:
        return [*out, ("MFU (steady)", f"{flops_text(u.achieved_flops_per_s, 'FLOP/s')} achieved; peak {peak.source}")]
    nominal = f"; nominal {flops_text(peak.nominal_flops_per_s, 'FLOP/s')}" if peak.nominal_flops_per_s else ""
    nominal = nominal or (f"; nominal {peak.nominal_source}" if peak.nominal_source else "")
    out += [
        ("peak FLOP/s", f"{flops_text(peak.flops_per_s, 'FLOP/s')} ({peak.source}{nominal})"),
        ("MFU (steady)", f"{percent(u.mfu)}: {flops_text(u.achieved_flops_per_s, 'FLOP/s')} achieved"),
    ]
    if u.whole_mfu is not None:
        out.append(("MFU, whole run", f"{percent(u.whole_mfu)}: {flops_text(u.whole_achieved_flops_per_s, 'FLOP/s')}"))
    if u.by_rank:
        out.append(("MFU by rank (steady)", ", ".join(f"rank {r.rank} {percent(r.mfu)}" for r in u.by_rank)))
    return out
