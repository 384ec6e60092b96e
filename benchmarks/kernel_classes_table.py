"""The kernel classes of every fixture with GPU kernels, as the Markdown table of
docs/results/kernel-classes.md (a test checks that the page says what this prints).

    python benchmarks/kernel_classes_table.py [FIXTURES_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analyzers.ingest.pipeline import read_trace
from analyzers.trace import kernel_classes
from analyzers.trace import tables as t

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "data" / "fixtures"
TRACES = (
    "nsys-h100/resnet18_train_nsys2025.3.1.sqlite",
    "nsys-ai/mfu_2gpu_before.sqlite",
    "nsys-ai/mfu_2gpu_after.sqlite",
    "nsys-ai/h100_2gpu_1s.sqlite",
    "nsys-ai/mock.sqlite",
    "kineto-h100/resnet50_bs100_train_torch2.11.json.gz",
    "kineto-2021/worker0.1623143089861.pt.trace.json.gz",
    "hta/benchmark_result_2869224_1695835535_trace.json.gz",
    "hta/nccl_data.json.gz",
    "hta/triton_example.json.gz",
    *(f"param-dlrm-8rank/{p.name}" for p in sorted((FIXTURES / "param-dlrm-8rank").glob("worker*.json.gz"))),
)
"""Every fixture trace with GPU kernels (extra-p's are CUDA samples, not a framework's, and are left out)."""
RUN_FOLDERS = ("cf98", "a9b3", "a266")
"""The traced H100 run folders (gpu-h100/*-<id>), whose kernels tables were ingested there."""
REPO = Path(__file__).resolve().parents[1]
REPO_RUNS = ("tests/data/gpu-h200/*-cd88",)
"""Traced run folders kept in the repository (the H200 CUPTI run of the ctypes collector)."""
HEADER = "| fixture | kernel time (ms) | other (%) | classes (% of kernel time, 1 % and more) |"


def fixture_kernels(fixtures: Path = FIXTURES) -> dict[str, pa.Table]:
    """Fixture (its path under `fixtures`, or the run folder's in the repository) -> its kernels table."""
    out = {}
    for rel in TRACES:
        tables, _clock = read_trace(fixtures / rel)
        out[rel] = tables[t.KERNELS]
    for short in RUN_FOLDERS:
        folder = next((fixtures / "gpu-h100").glob(f"*-{short}"))
        out[f"gpu-h100/{folder.name}"] = pq.read_table(folder / f"{t.KERNELS}.parquet")
    for pattern in REPO_RUNS:
        folder = next(REPO.glob(pattern))
        out[str(folder.relative_to(REPO))] = pq.read_table(folder / f"{t.KERNELS}.parquet")
    return out


def fixture_totals(fixtures: Path = FIXTURES) -> dict[str, dict[str, int]]:
    """Fixture -> kernel time (ns) by class."""
    return {name: kernel_classes.class_totals(kernels) for name, kernels in fixture_kernels(fixtures).items()}


def row(fixture: str, totals: dict[str, int]) -> str:
    total = sum(totals.values())
    other = 100 * totals.get(kernel_classes.OTHER, 0) / total
    shares = sorted(((100 * ns / total, key) for key, ns in totals.items()), key=lambda x: (-x[0], x[1]))
    text = ", ".join(f"{key} {share:.0f}" for share, key in shares if share >= 1 and key != kernel_classes.OTHER)
    return f"| {fixture} | {total / 1e6:,.1f} | {other:.1f} | {text} |"


def main(argv: list[str]) -> int:
    fixtures = Path(argv[0]) if argv else FIXTURES
    print(HEADER)
    print("| --- | --- | --- | --- |")
    for fixture, totals in fixture_totals(fixtures).items():
        print(row(fixture, totals))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
