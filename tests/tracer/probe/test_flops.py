"""A user's PyTorch script under `tracer profile --`: the probe counts one training step with PyTorch's
FlopCounterMode, off the steady steps, and the run's FLOPs per step are the script's own count of its model."""

from __future__ import annotations

from pathlib import Path

from tests.tracer.probe.counted_step import profile_counted
from tracer.core import schema

SCRIPT = Path(__file__).parent / "scripts" / "torch_flops.py"


def test_a_users_pytorch_step_is_counted_as_its_own_flop_counter_counts_it(tmp_path: Path) -> None:
    run = profile_counted("pytorch", SCRIPT, tmp_path / "runs")
    assert run.own_flops_per_step is not None and len(run.counted) == 1, run.counted  # one step, once
    u = run.utilisation
    assert u.flops_per_step == run.own_flops_per_step
    assert u.flops_source.startswith("counted by the probe") and "FlopCounterMode" in u.flops_source
    assert u.flops_per_image is None  # a script's images per step are its own business
    assert u.peak.flops_per_s is not None and u.mfu is not None  # a CPU run here: this machine's measured peak
    assert run.first_epoch_end_ns is not None
    assert run.counted[0][schema.T_NS] < run.first_epoch_end_ns  # counted in the warm-up epoch, off the steady steps
