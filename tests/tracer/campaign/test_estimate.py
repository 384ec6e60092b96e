"""`tracer campaign --dry-run` estimates the 100-epoch study plan's time and disk from earlier runs (issue 29):
the real H100 run folders in tests/data/fixtures/gpu-h100 are the earlier runs here."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.conftest import run_tracer
from tracer.campaign.estimate import cell_key, disk, estimate, spec_key, timings, traced_epochs
from tracer.campaign.plan import load_plan
from tracer.core.runfolder import RunFolder

ROOT = Path(__file__).resolve().parents[3]
B100 = "20261125-000159-pytorch-alexnet-big-gpu-b100-85cf"  # untraced: 18.06, 4.72, 4.83 s
NSYS = "20261125-001043-pytorch-alexnet-big-gpu-b100-cf98"  # nsys, traced whole: 12.74, 3.88 s


def study_plan(folder: Path, trace: str, name: str = "study.toml") -> Path:
    """plans/study.toml (5 frameworks x 4 models x 2 datasets x CPU/GPU x batch 1/100, 100 epochs), traced."""
    text = (ROOT / "plans" / "study.toml").read_text()
    assert 'trace = "none"' in text
    path = folder / name
    path.write_text(text.replace('trace = "none"', f'trace = "{trace}"'))
    return path


@pytest.fixture(scope="module")
def h100(real_fixtures: Path) -> Path:
    return real_fixtures / "gpu-h100"


def test_traced_epochs_follow_the_window_rules() -> None:
    assert traced_epochs("none", None, 100) == 0
    assert traced_epochs("nsys", None, 100) == 1  # the default window: epoch 2
    assert traced_epochs("nsys", "all", 100) == 100
    assert traced_epochs("torch", "2-5", 100) == 4
    assert traced_epochs("cupti", None, 3) == 3  # three epochs or fewer: traced whole


def test_a_100_epoch_cell_is_its_first_epoch_and_99_steady_ones(h100: Path, tmp_path: Path) -> None:
    """The first epoch (18 s) apart from the later ones (4.8 s): a mean over all epochs of the 3-epoch
    run would put 100 epochs at 920 s instead of about 500. The nsys run, traced whole, gives no epoch
    to the untraced speed."""
    plan = load_plan(study_plan(tmp_path, trace="none"))
    (cell,) = [c for c in plan.cells if c.cell_id == "pytorch-alexnet-big-gpu-b100-e100"]
    epochs = RunFolder(h100 / B100).epochs()
    assert cell_key(cell) == spec_key(RunFolder(h100 / B100).read_record().spec)
    timing = timings(h100)[cell_key(cell)]
    assert timing.first_epoch_s == pytest.approx(epochs[0].duration_s)
    assert timing.epoch_s == pytest.approx(statistics.fmean(e.duration_s for e in epochs[1:]))
    seconds = estimate(plan.cells, h100)[cell.cell_id]
    assert seconds is not None and 18.0 + 99 * 4.7 < seconds < 18.1 + 99 * 4.85 + 60
    assert seconds < 0.6 * 100 * statistics.fmean(e.duration_s for e in epochs)


def test_traced_study_plan_disk_with_and_without_windows(h100: Path, tmp_path: Path) -> None:
    plan = load_plan(study_plan(tmp_path, trace="nsys"))
    (cell,) = [c for c in plan.cells if c.cell_id.startswith("pytorch-alexnet-big-gpu-b100-e100")]
    space = disk(plan.cells, h100)[cell.cell_id]
    assert space is not None and space.traced_epochs == 1 and space.trace_mib is not None
    nsys = RunFolder(h100 / NSYS)
    tables_mib = sum(p.stat().st_size for p in nsys.path.glob("*.parquet")) / 2**20
    assert space.trace_mib == pytest.approx(tables_mib / 2)  # its 2 traced epochs' tables (raw/ was trimmed)
    assert space.trace_whole_mib == pytest.approx(100 * space.trace_mib)
    assert 0 < space.samples_mib < space.trace_whole_mib
    untraced = disk(load_plan(study_plan(tmp_path, trace="none", name="u.toml")).cells, h100)
    same = untraced[cell.cell_id.removesuffix("-nsys")]
    assert same is not None and same.trace_mib == 0


def test_dry_run_says_the_disk_with_and_without_windows(h100: Path, tmp_path: Path) -> None:
    result = run_tracer("campaign", str(study_plan(tmp_path, trace="nsys")), "--dry-run", "--out", str(h100))
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "160 runs in plan study, 160 to run; estimated" in said
    assert "traced in a window of 1 epoch(s), --trace-window" in said and "if traced whole" in said
