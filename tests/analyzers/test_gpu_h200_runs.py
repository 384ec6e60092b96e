"""The run folders recorded on the lent H200 (tests/data/gpu-h200/README.md), read as any run is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.run import Run

FOLDERS = sorted(p for p in (Path(__file__).parents[1] / "data" / "gpu-h200").iterdir() if p.is_dir())


def by(framework: str, model: str, data: str, trace: str = "none") -> Run:
    (found,) = [
        r
        for r in map(Run.open, FOLDERS)
        if (r.record.spec.framework, r.record.spec.model, r.record.spec.data, r.record.spec.trace)
        == (framework, model, data, trace)
    ]
    return found


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name[-4:] for p in FOLDERS])
def test_every_gpu_run_reads_whole_with_its_gpu_named_and_sampled(folder: Path) -> None:
    run = Run.open(folder)
    assert run.ok and run.record.spec.device == "gpu"
    assert [g.name for g in run.record.environment.gpus] == ["NVIDIA H200"]
    summary = run.summary
    assert summary.steady_images_per_s and summary.steady_images_per_s > 0
    assert summary.gpu_util_pct_mean is not None and summary.gpu_mem_peak_mib and summary.gpu_mem_peak_mib > 0
    assert run.problem_list() == []


@pytest.mark.parametrize(("framework", "model"), [("pytorch", "alexnet"), ("pytorch", "vgg16"), ("jax", "alexnet")])
def test_synthetic_data_lifts_the_input_bound_that_files_show(framework: str, model: str) -> None:
    files, synthetic = by(framework, model, "files"), by(framework, model, "synthetic")
    assert files.summary.steady_data_wait_pct is not None and files.summary.steady_data_wait_pct > 40
    assert synthetic.summary.steady_data_wait_pct is not None and synthetic.summary.steady_data_wait_pct < 5
    assert synthetic.summary.steady_images_per_s > files.summary.steady_images_per_s  # type: ignore[operator]


def test_the_cupti_run_dropped_nothing_and_has_its_cuda_tables() -> None:
    run = by("pytorch", "alexnet", "files", trace="cupti")
    overhead = [e for e in run.events() if e["kind"] == "trace_overhead"]
    assert overhead and overhead[0].get("dropped", 0) == 0
    api, kernels = run.table("cuda_api"), run.table("kernels")
    assert api is not None and api.num_rows > 10_000 and kernels is not None and kernels.num_rows > 5_000
