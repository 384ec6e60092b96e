"""A user's PyTorch script under `tracer profile --`: the probe counts one training step with PyTorch's
FlopCounterMode, off the steady steps, and the run's FLOPs per step are the script's own count of its model."""

from __future__ import annotations

import json
import re
from pathlib import Path

from analyzers.run.run import Run
from tests.conftest import require_framework, run_tracer
from tracer.core import schema
from tracer.core.runfolder import list_runs
from tracer.measure.environments import env_python

SCRIPT = Path(__file__).parent / "scripts" / "torch_flops.py"


def test_a_users_pytorch_step_is_counted_as_its_own_flop_counter_counts_it(tmp_path: Path) -> None:
    require_framework("pytorch")
    out = tmp_path / "runs"
    result = run_tracer("profile", "--out", str(out), "--", str(env_python("pytorch")), str(SCRIPT))
    assert result.returncode == 0, result.stderr[-3000:]
    own = re.search(r"own_flops_per_step (\d+)", result.stdout)
    assert own is not None, result.stdout[-2000:]
    (folder,) = list_runs(out)
    events = [json.loads(line) for line in (folder.path / schema.EVENTS_FILE).read_text().splitlines()]
    counted = [e for e in events if e[schema.KIND] == schema.Event.FLOPS]
    assert len(counted) == 1, counted  # one step, once
    u = Run.open(folder.path).summary.utilisation
    assert u.flops_per_step == int(own.group(1))
    assert u.flops_source.startswith("counted by the probe") and "FlopCounterMode" in u.flops_source
    assert u.flops_per_image is None  # a script's images per step are its own business
    assert u.peak.flops_per_s is not None and u.mfu is not None  # a CPU run here: this machine's measured peak
    first_epoch_end = min(e[schema.T_NS] for e in events if e[schema.KIND] == schema.Event.EPOCH_END)
    assert counted[0][schema.T_NS] < first_epoch_end  # counted in the warm-up epoch, off the steady steps
