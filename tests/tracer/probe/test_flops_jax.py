"""A user's JAX script under `tracer profile --`: the probe sums XLA's cost analysis of the jitted calls
in one training step, off the steady steps, and the run's FLOPs per step are the script's own count."""

from __future__ import annotations

import json
import re
from pathlib import Path

from analyzers.run.run import Run
from tests.conftest import require_framework, run_tracer
from tracer.core import schema
from tracer.core.runfolder import list_runs
from tracer.measure.environments import env_python

SCRIPT = Path(__file__).parent / "scripts" / "jax_flops.py"


def test_a_users_jax_step_is_counted_as_xla_counts_its_jitted_calls(tmp_path: Path) -> None:
    require_framework("jax")
    out = tmp_path / "runs"
    result = run_tracer("profile", "--out", str(out), "--", str(env_python("jax")), str(SCRIPT))
    assert result.returncode == 0, result.stderr[-3000:]
    own = re.search(r"own_flops_per_step (\d+)", result.stdout)
    assert own is not None, result.stdout[-2000:]
    (folder,) = list_runs(out)
    events = [json.loads(line) for line in (folder.path / schema.EVENTS_FILE).read_text().splitlines()]
    counted = [e for e in events if e[schema.KIND] == schema.Event.FLOPS]
    assert len(counted) == 1, counted  # one step, once
    u = Run.open(folder.path).summary.utilisation
    assert u.flops_per_step == int(own.group(1))  # both calls of the step, the donating update included
    assert u.flops_source.startswith("counted by the probe") and "cost_analysis" in u.flops_source
    assert u.peak.flops_per_s is not None and u.mfu is not None  # a CPU run here: this machine's measured peak
    first_epoch_end = min(e[schema.T_NS] for e in events if e[schema.KIND] == schema.Event.EPOCH_END)
    assert counted[0][schema.T_NS] < first_epoch_end  # counted in the warm-up epoch, off the steady steps


def test_a_jitted_function_inside_an_eager_gradient_is_not_counted_and_says_why(tmp_path: Path) -> None:
    require_framework("jax")
    out = tmp_path / "runs"
    result = run_tracer("profile", "--out", str(out), "--", str(env_python("jax")), str(SCRIPT), "eager")
    assert result.returncode == 0, result.stderr[-3000:]
    (folder,) = list_runs(out)
    u = Run.open(folder.path).summary.utilisation
    assert u.flops_per_step is None and u.mfu is None
    assert u.flops_source.startswith("not counted: a jitted call could not be analysed (loss:"), u.flops_source
    assert "eager transformation" in u.flops_source
