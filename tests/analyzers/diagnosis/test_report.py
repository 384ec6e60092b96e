"""The report's Diagnosis section and findings table, and the study's claims on real runs."""

from __future__ import annotations

from pathlib import Path

from analyzers.diagnosis.findings import AGREES, CLAIMS, DISAGREES, NOT_MEASURED, findings, load_runs
from analyzers.run_summary import summarise
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder


def test_findings_on_real_runs(plain3: RunFolder, oversubscribed: RunFolder) -> None:
    found = {f.claim.key: f for f in findings(load_runs([plain3, oversubscribed]))}
    assert list(found) == [c.key for c in CLAIMS]
    pt = found["pytorch-full-cpu"]
    s = summarise(plain3)
    assert pt.result in (AGREES, DISAGREES)
    assert f"CPU {s.cpu_pct_mean:.0f} %" in pt.numbers
    full = (s.cpu_pct_mean or 0) >= 90 and (s.threads_max or 0) - (s.threads_min or 0) <= 2
    if not full:
        assert pt.result == DISAGREES
    assert found["tensorflow-more-threads"].result == NOT_MEASURED  # no TensorFlow run given
    assert found["singa-crash"].result == NOT_MEASURED


def test_report_has_diagnosis_and_findings(plain3: RunFolder, oversubscribed: RunFolder, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = run_tracer("report", str(plain3.path), str(oversubscribed.path), "--out", str(out))
    assert result.returncode == 0, result.stderr
    page = (out / "index.html").read_text()
    assert "Diagnosis and findings" in page and "PyTorch keeps the CPU at 100 %" in page
    diag = (out / "diagnosis.md").read_text()
    assert "CPU oversubscribed" in diag
    assert "| claim | source | result | numbers |" in (out / "findings.md").read_text()
