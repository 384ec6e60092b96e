"""A user's JAX script under `tracer profile --`: the probe sums XLA's cost analysis of the jitted calls
in one training step, off the steady steps, and the run's FLOPs per step are the script's own count."""

from __future__ import annotations

from pathlib import Path

from tests.tracer.probe.counted_step import profile_counted
from tracer.core import schema

SCRIPT = Path(__file__).parent / "scripts" / "jax_flops.py"


def test_a_users_jax_step_is_counted_as_xla_counts_its_jitted_calls(tmp_path: Path) -> None:
    run = profile_counted("jax", SCRIPT, tmp_path / "runs")
    assert run.own_flops_per_step is not None and len(run.counted) == 1, run.counted  # one step, once
    u = run.utilisation
    assert u.flops_per_step == run.own_flops_per_step  # both calls of the step, the donating update included
    assert u.flops_source.startswith("counted by the probe") and "cost_analysis" in u.flops_source
    assert u.peak.flops_per_s is not None and u.mfu is not None  # a CPU run here: this machine's measured peak
    assert run.first_epoch_end_ns is not None
    assert run.counted[0][schema.T_NS] < run.first_epoch_end_ns  # counted in the warm-up epoch, off the steady steps


def test_a_jitted_function_inside_an_eager_gradient_is_not_counted_and_says_why(tmp_path: Path) -> None:
    u = profile_counted("jax", SCRIPT, tmp_path / "runs", "eager").utilisation
    assert u.flops_per_step is None and u.mfu is None
    assert u.flops_source.startswith("not counted: a jitted call could not be analysed (loss:"), u.flops_source
    assert "eager transformation" in u.flops_source
