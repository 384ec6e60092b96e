"""Table 2 and the energy figure. No GPU is guaranteed where tests run, so a real CPU run is copied
and given NVML samples of a known shape (constant 150 W, energy counter in mJ as NVML gives it):
the report must recover exactly that from the folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from analyzers.report import collect_runs, write_report
from analyzers.report.series import epoch_energy
from tests.analyzers.report import _expected as x
from tests.analyzers.report.conftest import set_spec
from tracer.core.runfolder import RunFolder

WATTS = 150.0


def _with_gpu_samples(src: Path, dst: Path, counter: bool) -> Path:
    shutil.copytree(src, dst)
    set_spec(dst, device="gpu")
    t = np.array(x.process_column(dst, "t_ns"), dtype=np.int64)
    t_s = (t - t[0]) / 1e9
    util = (np.arange(t.size) * 7) % 100
    table = pa.table(
        {
            "t_ns": t,
            "gpu": np.zeros(t.size, dtype=np.int64),
            "util_pct": util.astype(float),
            "mem_used_mib": np.full(t.size, 1000.0),
            "power_w": np.full(t.size, WATTS),
            "energy_mj": 5e6 + WATTS * 1000.0 * t_s if counter else pa.nulls(t.size, pa.float64()),
            "proc_mem_mib": np.full(t.size, 900.0),
        }
    )
    pq.write_table(table, dst / "samples" / "gpu.parquet")
    return dst


def test_gpu_table_and_energy_figure(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    run = _with_gpu_samples(tiny_pytorch_run.path, runs_dir / "gpu-run", counter=True)
    runs, warnings = collect_runs([runs_dir])
    out = tmp_path / "out"
    _, outputs = write_report(runs, out)
    assert warnings == []
    table2 = next(o for o in outputs if o.title.startswith("Table 2"))
    (row,) = table2.rows
    gpu = pq.read_table(run / "samples" / "gpu.parquet")
    util, t_ns = gpu.column("util_pct").to_pylist(), gpu.column("t_ns").to_pylist()
    epochs = x.epochs(run)
    lo, hi = epochs[min(1, len(epochs) - 1)][0], epochs[-1][1]  # the steady state: epochs after the first
    steady = [u for t, u in zip(t_ns, util) if lo <= t <= hi]
    assert row.gpu_util_pct_mean == pytest.approx(sum(steady) / len(steady), rel=1e-12)
    assert row.whole_run_gpu_util_pct_mean == pytest.approx(sum(util) / len(util), rel=1e-12)
    assert row.steady_epoch_s == pytest.approx(x.steady_epoch_s(run), rel=1e-12)
    assert [o for o in outputs if o.title.startswith("Table 1")][0].rows == []
    (energy_png,) = out.glob("fig-energy-*.png")
    with Image.open(energy_png) as im:
        im.load()
        assert im.width > 400
    assert "GPU util % mean, steady" in (out / "table2-gpu.md").read_text()


@pytest.mark.parametrize("counter", [True, False], ids=["energy-counter", "power-samples"])
def test_epoch_energy_is_power_times_duration(tiny_pytorch_run: RunFolder, tmp_path: Path, counter: bool) -> None:
    run = _with_gpu_samples(tiny_pytorch_run.path, tmp_path / "gpu-run", counter=counter)
    rows = epoch_energy(RunFolder(run))
    expected = x.epochs(run)
    assert [r.epoch for r in rows] == list(range(1, len(expected) + 1))
    for r, (start, end, _) in zip(rows, expected):
        assert r.energy_j == pytest.approx(WATTS * (end - start) / 1e9, rel=1e-6)
        assert r.mean_power_w == pytest.approx(WATTS, rel=1e-6)
        assert r.source == ("energy counter" if counter else "power samples")
