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
from tracer.runfolder import RunFolder
from tracer.sampler import CTX_INVOLUNTARY, CTX_VOLUNTARY, Sampler


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
