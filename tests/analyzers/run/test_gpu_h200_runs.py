"""The run folders recorded on the lent H200 (tests/data/gpu-h200/README.md), read as any run is read."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from analyzers.figures.run_summary import summarise
from analyzers.run.run import Run
from analyzers.trace import kernel_classes
from tracer.core.records import CommandWorkload

FOLDERS = sorted(p for p in (Path(__file__).parents[2] / "data" / "gpu-h200").iterdir() if p.is_dir())
BUILT_IN = [p for p in FOLDERS if "-cmd-" not in p.name]
COMMANDS = [p for p in FOLDERS if "-cmd-" in p.name]


def by(framework: str, model: str, data: str, trace: str = "none") -> Run:
    (found,) = [
        r
        for r in map(Run.open, BUILT_IN)
        if (r.record.measurement.framework, r.record.spec.model, r.record.spec.data, r.record.spec.trace)
        == (framework, model, data, trace)
    ]
    return found


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name[-4:] for p in FOLDERS])
def test_every_gpu_run_reads_whole_with_its_gpu_named_and_sampled(folder: Path) -> None:
    run = Run.open(folder)
    assert run.ok
    assert [g.name for g in run.record.environment.gpus] == ["NVIDIA H200"]
    summary = summarise(run)
    assert summary.steady_images_per_s and summary.steady_images_per_s > 0
    assert summary.gpu_util_pct_mean is not None and summary.gpu_mem_peak_mib and summary.gpu_mem_peak_mib > 0
    assert run.problem_list() == []


@pytest.mark.parametrize(("framework", "model"), [("pytorch", "alexnet"), ("pytorch", "vgg16"), ("jax", "alexnet")])
def test_synthetic_data_lifts_the_input_bound_that_files_show(framework: str, model: str) -> None:
    files, synthetic = by(framework, model, "files"), by(framework, model, "synthetic")
    assert summarise(files).steady_data_wait_pct is not None and summarise(files).steady_data_wait_pct > 40
    assert summarise(synthetic).steady_data_wait_pct is not None and summarise(synthetic).steady_data_wait_pct < 5
    assert summarise(synthetic).steady_images_per_s > summarise(files).steady_images_per_s  # type: ignore[operator]


def test_the_cupti_run_dropped_nothing_and_has_its_cuda_tables() -> None:
    run = by("pytorch", "alexnet", "files", trace="cupti")
    overhead = [e for e in run.events() if e["kind"] == "trace_overhead"]
    assert overhead and overhead[0].get("dropped", 0) == 0
    api, kernels = run.table("cuda_api"), run.table("kernels")
    assert api is not None and api.num_rows > 10_000 and kernels is not None and kernels.num_rows > 5_000


@pytest.mark.parametrize("folder", COMMANDS, ids=[p.name[-4:] for p in COMMANDS])
def test_own_training_on_cuda_has_the_probes_steps(folder: Path) -> None:
    run = Run.open(folder)
    assert isinstance(run.workload, CommandWorkload)
    steps = run.steps
    assert steps is not None
    per_epoch = Counter(steps.column("epoch").to_pylist())
    assert sorted(per_epoch) == [e.epoch for e in run.epochs()] and len(per_epoch) >= 2
    assert len(set(per_epoch.values())) == 1 and min(per_epoch.values()) >= 30  # the same batches every epoch
    assert len(set(steps.column("probe").to_pylist())) == 1
    assert steps.column("probe")[0].as_py() in ("torch.DataLoader", "grain")


def test_kernel_classes_of_a_real_cuda_transformer_trace_leave_little_in_other() -> None:
    (folder,) = [p for p in COMMANDS if p.name.endswith("a3ed")]
    kernels = Run.open(folder).table("kernels")
    assert kernels is not None
    totals = kernel_classes.class_totals(kernels)
    assert totals.get("attention", 0) > 0 and totals.get("matmul", 0) > 0
    assert totals.get(kernel_classes.OTHER, 0) <= kernel_classes.OTHER_LIMIT * sum(totals.values())
