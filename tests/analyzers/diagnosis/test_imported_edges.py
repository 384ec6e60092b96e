"""Real public traces at the edges of what the diagnosis reads: one rank's trace of an NCCL job (its record
says world size > 1, the run holds one rank) and a trace whose steady steps start before its first CUDA API
call. Each gives a verdict that says why it is not measured, never a traceback or a negative share."""

from __future__ import annotations

from pathlib import Path

from analyzers.diagnosis import diagnose
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder, list_runs


def _imported(source: Path, out: Path) -> RunFolder:
    result = run_tracer("import", str(source), "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    (folder,) = list_runs(out)
    return folder


def test_one_rank_of_a_job_is_told_to_import_every_rank(real_fixtures: Path, tmp_path: Path) -> None:
    folder = _imported(real_fixtures / "hta" / "nccl_data.json.gz", tmp_path)
    assert folder.read_record().world_size > 1  # the trace's own distributed info
    (v,) = [v for v in diagnose(folder) if v.rule == "straggler"]
    assert not v.measured and "rank 0's trace only" in v.finding and "tracer import" in v.finding
    result = run_tracer("diagnose", str(folder.path))
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]


def test_a_trace_that_starts_in_its_steady_steps_has_no_start_up_share(real_fixtures: Path, tmp_path: Path) -> None:
    folder = _imported(real_fixtures / "hta" / "triton_example.json.gz", tmp_path)
    (v,) = [v for v in diagnose(folder) if v.rule == "startup-heavy"]
    assert not v.measured and v.value is None, (v.value, v.finding)
