"""The Qt-free data layer: what a run folder becomes before any panel sees it."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder, list_runs
from viewer.data import load_run


def test_series_hold_every_sample(tiny_pytorch_run: RunFolder) -> None:
    data = load_run(tiny_pytorch_run.path)
    process = tiny_pytorch_run.samples("process")
    assert process is not None
    assert data.messages == []
    for key in ("cpu_pct", "rss_mib", "threads"):
        (series,) = data.series[key]
        assert len(series) == process.num_rows
        assert np.all(np.diff(series.t_ns) >= 0)
    assert "gpu_util_pct" not in data.series  # a CPU run: no GPU panels
    assert [e.epoch for e in data.epochs] == [1, 2]
    assert data.lanes.threads is not None and data.lanes.threads.lane_names


def test_cursor_value_is_the_last_sample_at_or_before(tiny_pytorch_run: RunFolder) -> None:
    (cpu,) = load_run(tiny_pytorch_run.path).series["cpu_pct"]
    assert cpu.value_at(float(cpu.t_ns[3])) == cpu.y[3]
    assert cpu.value_at(float(cpu.t_ns[3]) + 1) == cpu.y[3]
    assert cpu.value_at(float(cpu.t_ns[0]) - 1e6) is None


def test_missing_folder_is_a_message(tmp_path: Path) -> None:
    data = load_run(tmp_path / "nope")
    assert data.record is None and "does not exist" in data.messages[0]
    empty = load_run(tmp_path)
    assert any("not a run folder" in m for m in empty.messages)


def test_gpu_samples_become_one_series_per_gpu(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    path = tmp_path / tiny_pytorch_run.run_id
    shutil.copytree(tiny_pytorch_run.path, path)
    t0 = 1_790_000_000_000_000_000
    gpu = pa.table(
        {
            "t_ns": [t0 + k * 100_000_000 for k in range(5) for _ in range(2)],
            "gpu": [0, 1] * 5,
            "util_pct": [10.0, 90.0] * 5,
            "power_w": [None, 300.0] * 5,
        }
    )
    pq.write_table(gpu, RunFolder(path).sample_parquet_path("gpu"))
    data = load_run(path)
    util = {s.label: s.y.tolist() for s in data.series["gpu_util_pct"]}
    assert util == {"GPU0": [10.0] * 5, "GPU1": [90.0] * 5}
    assert [s.label for s in data.series["gpu_power_w"]] == ["GPU1"]  # all NaN on GPU0: no curve
    assert data.series["gpu_util_pct"][0].envelope.y_bounds == (10.0, 10.0)


def test_viewer_label_of_an_import_names_the_file_not_a_batch(real_fixtures: Path, tmp_path: Path) -> None:
    trace = real_fixtures / "kineto-h100/resnet50_bs100_train_torch2.11.json.gz"
    assert run_tracer("import", str(trace), "--out", str(tmp_path)).returncode == 0
    (folder,) = list_runs(tmp_path)
    label = load_run(folder.path).default_label
    # the file's stem (analyzers.ingest.readers.stem: "torch2.11" whole, not cut at its first dot); torch: the backend
    assert label == "pytorch resnet50_bs100_train_torch2.11 gpu torch (imported)", label
