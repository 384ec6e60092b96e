"""Shared by the probe's FLOPs tests: a user's script profiled as a user runs it, with what the script
printed of its own count and what the run recorded and computed of it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyzers.figures.run_summary import summarise
from analyzers.figures.utilisation import Utilisation
from analyzers.run.run import Run
from tests.conftest import require_framework, run_tracer
from tracer.core import schema
from tracer.core.runfolder import list_runs
from tracer.measure.environments import env_python


@dataclass(frozen=True)
class Counted:
    own_flops_per_step: int | None  # the script's own count (its `own_flops_per_step N` line), where it printed one
    counted: list[dict[str, Any]]  # the run's flops events
    first_epoch_end_ns: int | None
    utilisation: Utilisation


def profile_counted(framework: str, script: Path, out: Path, *args: str) -> Counted:
    """`tracer profile -- <framework's python> SCRIPT ARGS` into `out`; the run must end ok."""
    require_framework(framework)
    result = run_tracer("profile", "--out", str(out), "--", str(env_python(framework)), str(script), *args)
    assert result.returncode == 0, result.stderr[-3000:]
    own = re.search(r"own_flops_per_step (\d+)", result.stdout)
    (folder,) = list_runs(out)
    events = [json.loads(line) for line in (folder.path / schema.EVENTS_FILE).read_text().splitlines()]
    ends = [e[schema.T_NS] for e in events if e[schema.KIND] == schema.Event.EPOCH_END]
    return Counted(
        int(own.group(1)) if own else None,
        [e for e in events if e[schema.KIND] == schema.Event.FLOPS],
        min(ends) if ends else None,
        summarise(Run.open(folder.path)).utilisation,
    )
