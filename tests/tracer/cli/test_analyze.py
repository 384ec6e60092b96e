"""`tracer analyze`'s kernel classes: a table with the share left in `other` always printed, the same share
in JSON, and each kernel row's class."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_tracer


def test_kernel_classes_and_the_share_in_other(real_fixtures: Path) -> None:
    """extra-p's CUDA sample (not a framework's kernels): `init_array` and `vector_dot` are in no class,
    the vector additions and multiplication are element-wise; the table and JSON say how much is left in
    `other`."""
    trace = str(real_fixtures / "extra-p" / "ex-gpu.s10.sqlite")
    table = run_tracer("analyze", trace)
    assert table.returncode == 0, table.stderr
    assert "GPU kernel time by class" in table.stdout and "kernel time in 'other' (no class): 53.4 %" in table.stdout
    doc = json.loads(run_tracer("analyze", trace, "--format", "json").stdout)
    classes = {r["kernel_class"]: r for r in doc["kernel_classes"]}
    assert set(classes) == {"other", "elementwise"} and round(doc["kernel_other_pct"], 1) == 53.4
    assert sum(r["total_ns"] for r in classes.values()) == sum(r["total_ns"] for r in doc["kernels"])
    by_name = {r["name"].split("(")[0]: r["kernel_class"] for r in doc["kernels"]}
    assert by_name == {"init_array": "other", "vector_dot": "other", "vector_add": "elementwise",
                       "vector_add1": "elementwise", "vector_mul": "elementwise"}  # fmt: skip
