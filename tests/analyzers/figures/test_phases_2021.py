"""A 2021 Kineto trace files its `ProfilerStep#N` ranges as operators (category `Operator`), not as annotations:
its phases are cut at them as at any trace's step ranges, so `--phase steady` and the allocator verdict see
the steps the trace holds (counted here with json)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from analyzers.figures.phase_cuts import trace_phases
from analyzers.figures.phases import STEPS_NOTE
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder, list_runs

TRACE = "kineto-2021/worker0.1623143089861.pt.trace.json.gz"


@pytest.fixture(scope="module")
def imported(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> RunFolder:
    out = tmp_path_factory.mktemp("k2021")
    assert run_tracer("import", str(real_fixtures / TRACE), "--out", str(out)).returncode == 0
    (folder,) = list_runs(out)
    return folder


def test_the_2021_steps_cut_the_phases(imported: RunFolder, real_fixtures: Path) -> None:
    with gzip.open(real_fixtures / TRACE, "rt") as f:
        events = json.load(f)["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    assert {e.get("cat") for e in events if str(e.get("name", "")).startswith("ProfilerStep#")} == {"Operator"}
    phases = trace_phases(imported)
    steady = phases.steady
    assert steady is not None and phases.basis == STEPS_NOTE
    assert steady.start_ns is not None and steady.end_ns is not None
    assert steady.end_ns - steady.start_ns == 1000 * (max(e for _, e in steps) - steps[1][0])  # step 2 to the end
    shown = run_tracer("analyze", str(imported.path), "--phase", "steady")
    assert shown.returncode == 0 and "no step or epoch markers" not in shown.stdout
    verdicts = json.loads(run_tracer("diagnose", str(imported.path), "--format", "json").stdout)
    churn = next(v for v in verdicts["verdicts"] if v["rule"] == "allocator-churn")
    assert churn["measured"], churn
    assert any(e["name"] == "steady steps" and e["value"] == len(steps) - 1 for e in churn["evidence"]), churn
