"""What measuring cost: the sampler thread's CPU clock, in run.json and in `tracer show`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from analyzers.diagnosis.cost import measurement_cost
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder
from tracer.core.schema import CTX_INVOLUNTARY, CTX_VOLUNTARY
from tracer.measure.sampler import Sampler


def test_sampler_cpu_is_its_threads_cpu_clock(tmp_path: Path) -> None:
    """The figure the sampler reports is the kernel's CPU account of its own thread: read from
    /proc through psutil just before stopping it, it can only have grown by the last sample."""
    folder = RunFolder.create(tmp_path, "clock")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    sampler = Sampler(folder, lambda: child.pid, hz=50, nvml=None)
    sampler.start()
    time.sleep(1.5)
    tid = sampler._thread.native_id
    kernel = next(t for t in psutil.Process().threads() if t.id == tid)
    kernel_s = kernel.user_time + kernel.system_time
    info = sampler.stop()
    child.wait()
    assert info.sampler_cpu_s is not None
    assert kernel_s - 0.02 <= info.sampler_cpu_s <= kernel_s + 0.25  # clock ticks of 10 ms; one more sample
    assert info.sampler_cpu_s > 0
    process = folder.samples("process")
    assert process is not None and {CTX_VOLUNTARY, CTX_INVOLUNTARY} <= set(process.column_names)


def test_show_prints_the_sampler_overhead_of_run_json(tiny_pytorch_run: RunFolder) -> None:
    cost = json.loads(tiny_pytorch_run.run_json.read_text())["measurement_cost"]
    assert 0 < cost["sampler_cpu_s"] < cost["wall_s"]
    assert cost["training_cpu_s"] > 0
    assert cost["sampler_pct_of_training_cpu"] == pytest.approx(100 * cost["sampler_cpu_s"] / cost["training_cpu_s"],
                                                                rel=1e-3)  # fmt: skip
    shown = run_tracer("show", str(tiny_pytorch_run.path))
    assert shown.returncode == 0
    m = re.search(
        r"sampler CPU ([\d.]+) s = ([\d.]+) % of the training's ([\d.]+) CPU s, ([\d.]+) % of wall", shown.stdout
    )
    assert m, shown.stdout
    assert float(m.group(1)) == pytest.approx(cost["sampler_cpu_s"], abs=0.0005)
    assert float(m.group(2)) == pytest.approx(cost["sampler_pct_of_training_cpu"], abs=0.005)
    assert float(m.group(4)) == pytest.approx(cost["sampler_pct_of_wall"], abs=0.005)


def test_trace_volume_of_an_imported_trace(imported_nsys: RunFolder) -> None:
    import pyarrow.parquet as pq

    cost = measurement_cost(imported_nsys)
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in imported_nsys.path.glob("*.parquet"))
    assert cost.trace_records == rows and rows > 0
    assert cost.trace_bytes == sum(p.stat().st_size for p in imported_nsys.raw_dir.iterdir())
    assert cost.sampler_cpu_s is None  # nothing was sampled


def test_traced_run_reports_volume_and_ratio_to_an_untraced_twin(tmp_path: Path) -> None:
    """Two real runs of one spec in one folder, one under the PyTorch profiler: the traced one says
    how many records and bytes its trace holds and how much slower its epochs were."""
    from analyzers.figures.steady import epoch_stats
    from tests.conftest import TINY, require_framework
    from tracer.core.runfolder import list_runs

    require_framework("pytorch")
    args = ("profile", "--framework", "pytorch", "--model", "alexnet", *TINY, "--batch", "4", "--out", str(tmp_path))
    plain = run_tracer(*args)
    assert plain.returncode == 0, plain.stderr[-2000:]
    traced = run_tracer(*args, "--trace", "torch")
    assert traced.returncode == 0, traced.stderr[-2000:]
    untraced_run, traced_run = sorted(list_runs(tmp_path), key=lambda r: r.read_record().spec.trace != "none")
    cost = measurement_cost(traced_run)
    assert cost.untraced_run == untraced_run.run_id
    ratio = (epoch_stats(traced_run.epochs()).steady_epoch_s or 0) / (
        epoch_stats(untraced_run.epochs()).steady_epoch_s or 1
    )
    if _contended(untraced_run, traced_run):  # a busy machine: a contended run is never a cost ratio's baseline
        assert cost.traced_over_untraced_epoch is None and "contended" in cost.no_ratio_why
        assert "traced / untraced epoch time: not measured here" in traced.stdout
    else:
        assert cost.traced_over_untraced_epoch == pytest.approx(ratio)
        assert "traced / untraced epoch time" in traced.stdout
    assert cost.trace_records is not None and cost.trace_records > 0
    assert cost.trace_bytes is not None and cost.trace_bytes > 0
    assert measurement_cost(untraced_run).trace_records is None  # nothing traced, nothing to count
    assert "Diagnosis" in traced.stdout


def _contended(*folders: RunFolder) -> bool:
    from analyzers.figures.contention import contention

    return any(contention(f.samples("process")).contended for f in folders)


H100 = "gpu-h100"


def _h100(real_fixtures: Path, tail: str) -> RunFolder:
    return RunFolder(next(p for p in (real_fixtures / H100).iterdir() if p.name.endswith(tail)))


def test_e36e_costs_its_steady_epochs_against_its_untraced_pair(real_fixtures: Path) -> None:
    """CUPTI + py-spy at batch 1: steady epoch 11.44 s against 6573's 1.28 s (8.9x), not the 1.47x of
    all epochs (its first epoch was the faster one)."""
    cost = measurement_cost(_h100(real_fixtures, "e36e"))
    assert cost.untraced_run is not None and cost.untraced_run.endswith("6573")
    assert cost.traced_over_untraced_epoch == pytest.approx(11.44 / 1.28, rel=0.01)
    assert any("steady: 8.9" in line for line in cost.lines())


def test_cf98_training_cpu_is_the_workers_tree_under_nsys(real_fixtures: Path) -> None:
    """nsys launches the worker: the reaped-children CPU in run.json (0.48 s) is the launcher's; the
    worker's sampled tree used about 78 CPU s, so the sampler's 2.2 s are under 3 % of it, not 464 %."""
    from analyzers.diagnosis.cost import sampled_tree_cpu_s

    folder = _h100(real_fixtures, "cf98")
    recorded = folder.read_record().measurement_cost
    assert recorded is not None and recorded.sampler_pct_of_training_cpu > 400  # the defect, as recorded
    cost = measurement_cost(folder)
    assert cost.sampler_pct_of_training_cpu is not None and cost.sampler_pct_of_training_cpu < 100
    assert cost.training_cpu_s == pytest.approx(sampled_tree_cpu_s(folder))
    assert 60 < (cost.training_cpu_s or 0) < 100
    assert "nsys launched the worker" in cost.lines()[0]


def test_sampled_tree_agrees_with_the_kernels_account_where_the_worker_is_a_child(real_fixtures: Path) -> None:
    """The two figures measure one tree: on the untraced PyTorch runs within 2 %."""
    from analyzers.diagnosis.cost import sampled_tree_cpu_s

    for tail in ("85cf", "3950", "6573"):
        folder = _h100(real_fixtures, tail)
        recorded = folder.read_record().measurement_cost
        assert recorded is not None
        assert sampled_tree_cpu_s(folder) == pytest.approx(recorded.training_cpu_s, rel=0.02)


def test_trimmed_fixtures_say_what_is_not_there(real_fixtures: Path) -> None:
    """a266's raw CUPTI files and e36e's tables were removed from the fixtures: the cost says so, not
    '0.0 MiB raw' or '0 records' (a log beside them is no trace)."""
    a266 = " ".join(measurement_cost(_h100(real_fixtures, "a266")).lines())
    assert "the raw trace files not kept" in a266 and "0.0 MiB" not in a266
    e36e = " ".join(measurement_cost(_h100(real_fixtures, "e36e")).lines())
    assert "no trace tables in the folder" in e36e and " 0 records" not in e36e
