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
from tracer.sampler import Sampler


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
    from analyzers.run_summary import mean_epoch_s
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
    ratio = (mean_epoch_s(traced_run.epochs()) or 0) / (mean_epoch_s(untraced_run.epochs()) or 1)
    assert cost.traced_over_untraced_epoch == pytest.approx(ratio)
    assert cost.trace_records is not None and cost.trace_records > 0
    assert cost.trace_bytes is not None and cost.trace_bytes > 0
    assert measurement_cost(untraced_run).trace_records is None  # nothing traced, nothing to count
    assert "traced / untraced epoch time" in traced.stdout and "Diagnosis" in traced.stdout
