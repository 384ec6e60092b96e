"""The low-MFU verdict on real runs: the H100 fixtures (against the table's peak) get the settings that raise
MFU on their framework; a CPU run is never told them."""

from __future__ import annotations

from pathlib import Path

from analyzers.diagnosis import diagnose
from analyzers.diagnosis import thresholds as th
from analyzers.diagnosis.verdict import Severity
from analyzers.run.run import Run
from tracer.core.runfolder import RunFolder


def verdict(path: Path):  # type: ignore[no-untyped-def]
    return next(v for v in diagnose(Run.open(path)) if v.rule == "low-mfu")


def test_pytorch_vgg16_on_the_h100_is_told_every_pytorch_setting(real_fixtures: Path) -> None:
    v = verdict(real_fixtures / "gpu-h100" / "20261125-000240-pytorch-vgg16-small-gpu-b100-7ff0")
    assert v.fired and v.measured and v.severity is Severity.MEDIUM  # 12 %: under 20, over 5
    assert v.value is not None and th.LOW_MFU_HIGH_PCT < v.value < th.LOW_MFU_PCT
    for words in ("torch.autocast", "tracer --amp", "a larger --batch", "torch.compile", "channels_last"):
        assert words in v.knob, (words, v.knob)


def test_jax_is_told_its_own_settings_and_no_channels_last(real_fixtures: Path) -> None:
    v = verdict(real_fixtures / "gpu-h100" / "20261125-002305-jax-alexnet-big-gpu-b100-a504")
    assert v.fired and v.severity is Severity.HIGH  # 0.42 % of the peak
    assert "jnp.bfloat16" in v.knob and "jax.jit" in v.knob
    assert "channels" not in v.knob and "torch" not in v.knob  # flax is channels-last already


def test_a_cpu_run_is_not_judged(tiny_pytorch_run: RunFolder) -> None:
    v = verdict(tiny_pytorch_run.path)
    assert not v.fired and not v.measured and v.knob == ""
    assert "a CPU run" in v.finding
