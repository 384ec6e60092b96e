"""Low model FLOPs utilisation: the steady steps use a small share of the GPU's declared peak, with the
settings that raise it on that framework and device (mixed precision, a larger batch, compilation,
channels-last). A CPU run is not judged: those settings raise tensor-core work, which a CPU has none of."""

from __future__ import annotations

from analyzers.diagnosis import thresholds as th
from analyzers.diagnosis.inputs import RunTables
from analyzers.diagnosis.knobs import join, knob, larger_batch, tracer_trained
from analyzers.diagnosis.verdict import Evidence, RuleName, Severity, Verdict, not_measured, quiet, rule
from tracer.core.frameworks import FRAMEWORKS, Tuning


def precision(t: RunTables) -> str:
    """Mixed precision, unless the run already used it: the framework's setting, and --amp where the tracer sets it."""
    spec = t.record.spec
    if spec is not None and spec.amp:
        return ""
    text = knob(t.record, Tuning.PRECISION, "mixed precision")
    info = FRAMEWORKS.get(t.record.measurement.framework)
    if text and info is not None and info.amp and tracer_trained(t.record):
        text += " (tracer --amp)"
    return text


LOW_MFU = RuleName("low-mfu", "low MFU")


@rule(LOW_MFU)
def low_mfu(t: RunTables) -> Verdict:
    name, title = LOW_MFU
    if t.record.measurement.device != "gpu":
        return not_measured(
            name, title, "a CPU run (mixed precision, compilation and channels-last raise a GPU's share)"
        )
    u = t.utilisation
    if u is None or u.mfu is None:
        why = "no FLOPs counted" if u is None or u.flops_per_step is None else f"peak {u.peak.source}"
        return not_measured(name, title, why)
    pct = 100 * u.mfu
    evidence = (
        Evidence("achieved", None if u.achieved_flops_per_s is None else u.achieved_flops_per_s / 1e12, "TFLOP/s"),
        Evidence(
            f"peak ({u.peak.dtype})", None if u.peak.flops_per_s is None else u.peak.flops_per_s / 1e12, "TFLOP/s"
        ),
        Evidence("FLOPs per step", None if u.flops_per_step is None else u.flops_per_step / 1e9, "GFLOP"),
    )
    if pct >= th.LOW_MFU_PCT:
        return quiet(
            name, title, f"the steady steps reach {pct:.0f} % of the peak", pct, "% of peak", th.LOW_MFU_PCT, evidence
        )
    advice = join(
        precision(t),
        larger_batch(t.record),
        knob(t.record, Tuning.LAUNCH, "compilation"),
        knob(t.record, Tuning.LAYOUT, "channels-last"),
    )
    severity = Severity.HIGH if pct < th.LOW_MFU_HIGH_PCT else Severity.MEDIUM
    finding = (
        f"the steady steps reach {pct:.2g} % of the GPU's {u.peak.dtype} peak; see input-bound and host-bound first"
    )
    return Verdict(name, title, True, True, severity, finding, pct, "% of peak", th.LOW_MFU_PCT, evidence, advice)
