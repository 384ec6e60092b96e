"""MFU in `diff` (one sentence) and `compare` (one row), on the H100 run folders of the fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzers.comparison.compare import compare, median_of
from analyzers.comparison.diff import diff
from analyzers.figures.run_summary import summarise
from analyzers.figures.utilisation import percent
from analyzers.run.run import Run

ALEXNET = "20261125-000159-pytorch-alexnet-big-gpu-b100-85cf"
VGG16 = "20261125-000240-pytorch-vgg16-small-gpu-b100-7ff0"
JAX_ALEXNET = "20261125-002305-jax-alexnet-big-gpu-b100-a504"


def test_diff_says_which_run_reaches_more_of_the_peak(real_fixtures: Path) -> None:
    root = real_fixtures / "gpu-h100"
    a, b = Run.open(root / ALEXNET), Run.open(root / VGG16)
    found = diff(a, b)
    ua, ub = summarise(a).utilisation, summarise(b).utilisation
    expected = f"B reaches {percent(ub.mfu)} of the peak against A's {percent(ua.mfu)}"
    assert [s for s in found.sentences if s.startswith(expected)], found.sentences
    assert expected.startswith("B reaches 12 % of the peak against A's 1.0 %")


def test_compare_has_an_mfu_row_framework_against_framework(real_fixtures: Path) -> None:
    root = real_fixtures / "gpu-h100"
    runs = [Run.open(root / ALEXNET), Run.open(root / JAX_ALEXNET)]
    row = next(d for d in compare([[r] for r in runs]).differences if d.metric.startswith("MFU"))
    for value, run in zip(row.values, runs, strict=True):
        assert median_of(value) == pytest.approx(100 * summarise(run).utilisation.mfu)  # type: ignore[operator]
    assert median_of(row.values[0]) > median_of(row.values[1])  # type: ignore[operator]
