"""Fixture traces ingested once per session into run folders (ingest is what is under test elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.ingest.pipeline import ingest_file
from tracer.core.runfolder import RunFolder

NSYS_FILES = [
    "nsys-h100/resnet18_train_nsys2025.3.1.sqlite",
    "extra-p/con_kernel.sqlite",
    "extra-p/ex-gpu.s10.sqlite",
]
KINETO_FILES = [
    "hta/benchmark_result_2869224_1695835535_trace.json.gz",
    "kineto-h100/resnet50_bs100_train_torch2.11.json.gz",
]


@pytest.fixture(scope="session")
def ingested(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunFolder]:
    """Every fixture file, each ingested into its own (bare) run folder."""
    out = {}
    for rel in NSYS_FILES + KINETO_FILES:
        folder = RunFolder(tmp_path_factory.mktemp("ingested"))
        ingest_file(real_fixtures / rel, folder)
        out[rel] = folder
    return out
