"""An imported nsys report has no operator shapes, and its kernels' names hold tile sizes, not problem
sizes: its FLOPs are not counted, and every surface says why, with its own count of such kernels."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from analyzers.figures.run_summary import summarise
from analyzers.run.run import Run
from tests.conftest import run_tracer
from tracer.core.runfolder import list_runs

NSYS = "nsys-h100/resnet18_train_nsys2025.3.1.sqlite"


def test_an_nsys_reports_flops_are_not_counted_and_say_why(real_fixtures: Path, tmp_path: Path) -> None:
    with sqlite3.connect(real_fixtures / NSYS) as db:  # its cuDNN convolutions and cuBLAS products, by name
        (gemms,) = db.execute(
            "SELECT COUNT(DISTINCT s.value) FROM CUPTI_ACTIVITY_KIND_KERNEL k"
            " JOIN StringIds s ON s.id = k.demangledName"
            " WHERE s.value LIKE '%xmma%' OR s.value LIKE '%gemm%' OR s.value LIKE '%dgrad%' OR s.value LIKE '%SplitK%'"
        ).fetchone()
    assert gemms > 10
    result = run_tracer("import", str(real_fixtures / NSYS), "--out", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    (folder,) = list_runs(tmp_path / "runs")
    u = summarise(Run.open(folder.path)).utilisation
    assert u.flops_per_step is None and u.mfu is None
    said = re.search(r"not counted: .* names of its (\d+) matrix-multiply and convolution kernels", u.flops_source)
    assert said is not None and int(said.group(1)) == gemms, u.flops_source
    example = re.search(r"tile sizes, not their problem sizes \(e\.g\. (.+)\)$", u.flops_source)
    assert example is not None and re.search(r"\d+x\d+", example.group(1)), u.flops_source
    shown = run_tracer("show", str(folder.path))
    assert shown.returncode == 0 and "tile sizes" in shown.stdout, shown.stdout[-2000:]
