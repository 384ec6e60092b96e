"""FLOPs, peaks and MFU of real runs: the H100 run folders in the fixtures against the declared table (their
FLOPs recomputed from the model and batch they recorded), and a CPU run made here against this machine's
measured peak (cached once per machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from analyzers.figures.run_summary import summarise
from analyzers.figures.utilisation import ANALYTIC, percent
from analyzers.run.run import Run
from tracer.core.device_peaks import Dtype, device, run_dtype
from tracer.core.model_flops import model_flops
from tracer.core.runfolder import RunFolder
from tracer.measure import cpu_peak

H100_TF32 = 494.7e12  # NVIDIA H100 SXM datasheet, TF32 tensor core, dense


def h100_runs(root: Path) -> list[Path]:
    return sorted(p for p in (root / "gpu-h100").iterdir() if (p / "run.json").exists())


def test_h100_runs_measured_against_the_tables_tf32_peak(real_fixtures: Path) -> None:
    runs = h100_runs(real_fixtures)
    assert len(runs) == 12
    for path in runs:
        record = json.loads((path / "run.json").read_text())
        spec = record["spec"]
        s = summarise(Run.open(path))
        u = s.utilisation
        per_image = model_flops(spec["model"], spec["image_size"], spec["num_classes"]).training
        assert u.flops_per_image == per_image and u.flops_per_step == per_image * spec["batch"]
        assert u.flops_source == ANALYTIC
        assert u.peak.flops_per_s == H100_TF32 and u.peak.dtype == "tf32"  # fp32 runs: TF32 tensor cores
        assert "H100 SXM" in u.peak.source and "datasheet" in u.peak.source
        assert s.steady_images_per_s is not None and u.mfu is not None
        assert u.achieved_flops_per_s == pytest.approx(per_image * s.steady_images_per_s)
        assert u.mfu == pytest.approx(per_image * s.steady_images_per_s / H100_TF32)
        assert 0 < u.mfu < 1
        assert u.whole_mfu == pytest.approx(per_image * s.images_per_s / H100_TF32)  # type: ignore[operator]


def test_vgg16_at_batch_100_reaches_twelve_percent_and_alexnet_one(real_fixtures: Path) -> None:
    """VGG16's convolutions keep the H100 busier than AlexNet's input-bound steps (92 % data wait)."""
    root = real_fixtures / "gpu-h100"
    vgg = summarise(Run.open(root / "20261125-000240-pytorch-vgg16-small-gpu-b100-7ff0")).utilisation
    alexnet = summarise(Run.open(root / "20261125-000159-pytorch-alexnet-big-gpu-b100-85cf")).utilisation
    assert percent(vgg.mfu) == "12 %"
    assert percent(alexnet.mfu) == "1.0 %"


def test_analyze_json_carries_the_fields(real_fixtures: Path) -> None:
    path = h100_runs(real_fixtures)[0]
    out = subprocess.run(
        [sys.executable, "-m", "tracer", "analyze", str(path), "--format", "json"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    head = json.loads(out.stdout)
    for key in ("flops_per_image", "flops_per_step", "achieved_flops_per_s", "peak_flops_per_s", "mfu", "peak_source"):
        assert key in head, key
    assert head["mfu"] == pytest.approx(head["achieved_flops_per_s"] / head["peak_flops_per_s"])


def test_device_table_lookups() -> None:
    h100 = device("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.label == "H100 SXM"
    assert run_dtype(False, h100) is Dtype.TF32 and run_dtype(True, h100) is Dtype.FP16
    t4 = device("Tesla T4")
    assert t4 is not None and run_dtype(False, t4) is Dtype.FP32  # no TF32 on Turing
    nano = device("NVIDIA Jetson Nano Developer Kit")
    assert nano is not None and nano.label == "Jetson Nano"
    orin_nano = device("NVIDIA Jetson Orin Nano Developer Kit")
    assert orin_nano is not None and orin_nano.label == "Jetson Orin Nano"  # not the older Nano
    assert device("NVIDIA GeForce RTX 2080 Ti") is None


@pytest.mark.slow
def test_a_cpu_run_here_is_measured_against_this_machines_peak(
    make_run: Callable[..., RunFolder], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_run("pytorch", "--model", "resnet50")
    monkeypatch.setenv("TRACER_CACHE", str(tmp_path))  # measured afresh, into this test's cache
    run = Run.open(folder.path)
    record = run.read_record()
    u = summarise(run).utilisation
    key = cpu_peak.machine_key(
        record.environment.cpu_model, record.environment.cpu_logical_cores, record.environment.hostname
    )
    measured = cpu_peak.cached(key)
    assert measured is not None  # measured on first use, kept for the next run
    assert u.peak.flops_per_s == measured.measured_flops_per_s and u.peak.source.startswith("measured on")
    assert u.flops_per_step == model_flops("resnet50", 64, 3).training * record.spec.batch
    assert u.mfu is not None and 0 < u.mfu < 1
    assert u.mfu == pytest.approx(u.achieved_flops_per_s / measured.measured_flops_per_s)  # type: ignore[operator]
    env = dict(os.environ, TRACER_CACHE=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-m", "tracer", "show", str(folder.path)], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    assert "MFU (steady)" in out.stdout and percent(u.mfu) in out.stdout


def test_a_run_from_another_machine_has_no_cpu_peak(tiny_pytorch_run: RunFolder, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / tiny_pytorch_run.path.name
    shutil.copytree(tiny_pytorch_run.path, copy)
    data = json.loads((copy / "run.json").read_text())
    data["environment"]["hostname"] = "elsewhere"
    (copy / "run.json").write_text(json.dumps(data))
    u = summarise(Run.open(copy)).utilisation
    assert u.flops_per_step is not None and u.peak.flops_per_s is None and u.mfu is None
    assert "not measured" in u.peak.source and "elsewhere" in u.peak.source


@pytest.mark.slow
def test_each_rank_of_a_two_rank_run_has_its_mfu(make_run: Callable[..., RunFolder]) -> None:
    from analyzers.figures.ranks import rank_table

    folder = make_run("pytorch", "--nproc", "2", "--batch", "4")
    run = Run.open(folder.path)
    u = summarise(run).utilisation
    table = rank_table(run)
    assert table is not None and u.peak.flops_per_s is not None and u.flops_per_step is not None
    assert [r.rank for r in u.by_rank] == [0, 1]
    for mine, row in zip(u.by_rank, table.rows, strict=True):
        assert row.step_mean_s is not None
        assert mine.mfu == pytest.approx(u.flops_per_step / row.step_mean_s / u.peak.flops_per_s)
    # The epochs' images are rank 0's: the run's FLOP/s are both ranks'.
    s = summarise(run)
    assert u.achieved_flops_per_s == pytest.approx(u.flops_per_image * s.steady_images_per_s * 2)  # type: ignore[operator]
