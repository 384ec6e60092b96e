"""Table 1 / Table 2: every cell against the value computed from the run folder's own files."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.analyzers.report import _expected as x
from tests.analyzers.report.conftest import ReportRuns
from tests.conftest import spec_of


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _row_of(rows: list[dict[str, str]], run: Path) -> dict[str, str]:
    (row,) = [r for r in rows if run.name in r["run_ids"].split()]
    return row


def test_ok_run_cells_equal_values_from_the_folder(report_dir: Path, report_runs: ReportRuns) -> None:
    run = report_runs.ok
    row = _row_of(_rows(report_dir / "table1-cpu.csv"), run)
    spec = spec_of(x.record(run))
    assert row["framework"] == spec["framework"] == "pytorch"
    assert (row["model"], row["dataset"], row["device"], int(row["batch"])) == (
        spec["model"],
        spec["dataset"],
        "cpu",
        spec["batch"],
    )
    assert row["status"] == "ok" and row["cause"] == ""
    assert (int(row["runs_ok"]), int(row["runs_failed"])) == (1, 0)
    assert int(row["epochs"]) == len(x.epochs(run)) == spec["epochs"]
    assert len(x.epochs(run)) >= 2, "the steady state needs an epoch after the warm-up"
    assert float(row["steady_epoch_s"]) == pytest.approx(x.steady_epoch_s(run), rel=1e-12)
    assert float(row["steady_images_per_s"]) == pytest.approx(x.steady_images_per_s(run), rel=1e-12)
    assert float(row["first_epoch_s"]) == pytest.approx(x.first_epoch_s(run), rel=1e-12)
    assert float(row["steady_epoch_s"]) != pytest.approx(x.mean_epoch_s(run), rel=1e-9)  # warm-up left out
    assert row["steady_includes_warmup"] == "False" and int(row["warmup_epochs"]) == 1
    cpu = x.steady_process_column(run, "cpu_pct")  # every figure of the row: the steady state
    assert float(row["cpu_pct_mean"]) == pytest.approx(sum(cpu) / len(cpu), rel=1e-12)
    assert float(row["peak_rss_mib"]) == pytest.approx(max(x.steady_process_column(run, "rss_mib")), rel=1e-12)
    whole = x.process_column(run, "cpu_pct")  # the whole run's, in the column named for it
    assert float(row["whole_run_cpu_pct_mean"]) == pytest.approx(sum(whole) / len(whole), rel=1e-12)
    assert row["gpu_util_pct_mean"] == ""


def test_failed_run_is_a_failed_row_with_its_cause(report_dir: Path, report_runs: ReportRuns) -> None:
    run = report_runs.failed
    outcome = x.record(run)["outcome"]
    assert outcome["status"] == "failed" and "injected fault" in outcome["cause"]
    row = _row_of(_rows(report_dir / "table1-cpu.csv"), run)
    assert (row["status"], row["cause"]) == ("failed", outcome["cause"])
    assert (int(row["runs_ok"]), int(row["runs_failed"]), int(row["batch"])) == (0, 1, 2)
    assert row["steady_epoch_s"] == row["steady_images_per_s"] == ""
    md = (report_dir / "table1-cpu.md").read_text()
    (line,) = [ln for ln in md.splitlines() if "**failed:" in ln]
    assert f"**failed: {outcome['cause']}**" in line
    assert [c.strip() for c in line.split("|")].count("failed") == 2  # mean epoch time and images/s say so too


def test_markdown_cells_are_the_csv_values_formatted(report_dir: Path, report_runs: ReportRuns) -> None:
    run = report_runs.ok
    md = (report_dir / "table1-cpu.md").read_text().splitlines()
    header = [c.strip() for c in next(ln for ln in md if ln.startswith("| Framework")).strip("|").split("|")]
    (line,) = [ln for ln in md if "| 1/1 | ok" in ln]  # "ok", or "ok; 1 contended" on a busy machine
    cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|"))))
    cpu = x.steady_process_column(run, "cpu_pct")  # the steady state, like every figure of the row
    assert cells["Framework"] == "PyTorch"
    assert cells["Batch"] == "1"
    assert cells["Epoch time, steady (s)"] == f"{x.steady_epoch_s(run):.3f}"
    assert cells["Images/s, steady"] == f"{x.steady_images_per_s(run):.2f}"
    assert cells["First epoch (s)"] == f"{x.first_epoch_s(run):.3f}"
    assert "Case" not in header  # the section title names the case
    assert "steady state = the epochs after the first 1" in "\n".join(md)  # the caption states the definition
    assert cells["CPU % mean, steady (100 = all cores)"] == f"{sum(cpu) / len(cpu):.1f}"
    assert cells["Peak RSS, steady (MiB)"] == f"{max(x.steady_process_column(run, 'rss_mib')):.0f}"


def test_imported_gpu_traces_are_listed_in_table2_not_table1(report_dir: Path, report_runs: ReportRuns) -> None:
    rows = _rows(report_dir / "table1-cpu.csv")
    assert {r["run_ids"] for r in rows} == {report_runs.ok.name, report_runs.failed.name}
    table2 = _rows(report_dir / "table2-gpu.csv")
    assert {r["run_ids"] for r in table2} == {p.name for p in report_runs.imported}  # `tracer import`: gpu
    assert all(r["imported"] == "True" and r["steady_epoch_s"] == "" for r in table2)
    md = (report_dir / "table2-gpu.md").read_text()
    assert "No GPU runs were given." not in md and md.count("imported trace: CUDA API and kernels only") == 2
