"""One basis per table (analyzers.figures.basis): on the H100 fixtures, every surface shows the steady figures as the
headline and a whole-run figure only where a row or column is named for it.

7ff0 (PyTorch) and 7a96 (JAX) train VGG16 at batch 100; JAX's 44 s compile epoch dominates its whole run,
so its whole-run GPU utilisation (60 %) and energy per epoch (5354 J) are 4x PyTorch's, while over the
steady epochs JAX keeps the GPU busier less (29 % vs 47 %) and uses less energy per epoch.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from analyzers.figures.basis import FIGURES, WHOLE_RUN
from analyzers.figures.run_summary import RunSummary, summarise
from analyzers.report import collect_runs, write_report
from analyzers.report.series import epoch_energy
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder

PYTORCH, JAX = "7ff0", "7a96"


def _runs(real_fixtures: Path) -> dict[str, Path]:
    return {p.name[-4:]: p for p in (real_fixtures / "gpu-h100").iterdir() if (p / "run.json").exists()}


def _counter_j(run: Path, epochs: tuple[int, ...]) -> float:
    """Mean energy per epoch of `epochs` from NVML's counter, interpolated at the epochs' bounds (computed
    here from the files, not by the tool)."""
    gpu = pq.read_table(run / "samples" / "gpu.parquet").to_pandas().sort_values("t_ns")
    folder = RunFolder(run)
    joules = []
    for e in folder.epochs():
        if e.epoch in epochs:
            e0, e1 = np.interp([e.start_ns, e.end_ns], gpu.t_ns, gpu.energy_mj / 1000.0)
            joules.append(e1 - e0)
    return float(np.mean(joules))


def _whole_only(s: RunSummary) -> list[str]:
    """The whole-run figures of a run as printed (one decimal, and whole numbers), where they differ from
    the steady ones by more than 10 %: text that must never appear on a line not named for the whole run."""
    out = []
    for f in FIGURES:
        steady, whole = s.steady.value(f.name), s.whole.value(f.name)
        if whole is None or steady is None or abs(whole - steady) <= 0.1 * abs(steady) or abs(whole) < 10:
            continue
        out += [f"{whole:.1f}"] + ([f"{whole:.0f}"] if abs(whole) >= 100 else [])
    return [n for n in out if n not in s.gpu]  # not the CUDA version "13.0"


def _lines_holding(text: str, numbers: list[str]) -> list[str]:
    """The lines where one of `numbers` stands as a number of its own (not inside a longer one)."""
    pattern = re.compile(r"(?<![\d.])(" + "|".join(re.escape(n) for n in numbers) + r")(?![\d])")
    return [line for line in text.splitlines() if pattern.search(line)]


def test_compare_shows_steady_figures_first_and_names_the_whole_runs(real_fixtures: Path, tmp_path: Path) -> None:
    runs = _runs(real_fixtures)
    out = tmp_path / "cmp.csv"
    result = run_tracer("compare", str(runs[PYTORCH]), str(runs[JAX]), "--csv", str(out))
    assert result.returncode == 0, result.stderr
    with out.open() as f:
        rows = {r["metric"]: r for r in csv.DictReader(f)}

    def pair(metric: str) -> tuple[float, float]:
        return float(rows[metric]["run_a"]), float(rows[metric]["run_b"])

    assert pair("GPU utilisation mean (steady)") == pytest.approx((47.1, 28.6), abs=0.1)
    assert pair("GPU utilisation mean (whole run)") == pytest.approx((14.8, 60.2), abs=0.1)
    energy = "energy per epoch, NVML GPU 0 (energy counter)"
    steady_j = pair(f"{energy} (steady)")
    assert steady_j == pytest.approx((_counter_j(runs[PYTORCH], (2, 3)), _counter_j(runs[JAX], (2, 3))), rel=1e-6)
    assert steady_j[1] < steady_j[0]  # over the steady epochs JAX uses less energy per epoch, not 3.7x more
    assert pair(f"{energy} (whole run)") == pytest.approx((1445, 5354), abs=1)
    # every row is named for its phase, and the steady rows come before any whole-run row
    metrics = [m for m in rows if m != "run id"]
    first_whole = next(i for i, m in enumerate(metrics) if m.endswith(f"({WHOLE_RUN})"))
    assert all(not m.endswith("(steady)") for m in metrics[first_whole:])
    for line in _lines_holding(result.stdout, ["14.8", "60.2", "1445", "5354"]):
        assert WHOLE_RUN in line, line


def test_no_surface_shows_a_whole_run_figure_unnamed(real_fixtures: Path, tmp_path: Path) -> None:
    """show, compare, runs, Table 2 (Markdown), the viewer's run browser and the notebook frame: a whole-run
    figure appears only on a line, column or key named for the whole run."""
    from analyzers.report.notebook import load_runs
    from viewer.browser import COLUMNS, browse

    runs = _runs(real_fixtures)
    summaries = {key: summarise(RunFolder(runs[key])) for key in (PYTORCH, JAX)}
    texts = {f"show {key}": run_tracer("show", str(runs[key])).stdout for key in (PYTORCH, JAX)}
    texts["compare"] = run_tracer("compare", str(runs[PYTORCH]), str(runs[JAX])).stdout
    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    for key in (PYTORCH, JAX):
        (runs_dir / runs[key].name).symlink_to(runs[key])
    texts["runs"] = run_tracer("runs", "--runs", str(runs_dir)).stdout
    loaded, _ = collect_runs([runs[PYTORCH], runs[JAX]])
    _, outputs = write_report(loaded, tmp_path / "report", formats=("png",))
    texts["table 2"] = (tmp_path / "report" / "table2-gpu.md").read_text()
    texts["viewer run browser"] = "\n".join(" | ".join(row[: len(COLUMNS)]) for row in browse(runs_dir))
    for s in summaries.values():
        numbers = _whole_only(s)
        assert numbers, "the fixture's whole run must differ from its steady state"
        for surface, text in texts.items():
            for line in _lines_holding(text, numbers):
                if s.run_id in text and (surface != "table 2" or s.run_id[-4:] in line or "|" in line):
                    assert WHOLE_RUN in line or "whole_run" in line, f"{surface}: {line}"
    frame = load_runs(runs[PYTORCH], runs[JAX]).runs.set_index("run_id")
    for s in summaries.values():
        assert frame.loc[s.run_id, "gpu_util_pct_mean"] == pytest.approx(s.steady.gpu_util_pct_mean)
        assert frame.loc[s.run_id, "data_wait_pct"] == pytest.approx(s.steady.data_wait_pct)
        assert frame.loc[s.run_id, "whole_run_gpu_util_pct_mean"] == pytest.approx(s.whole.gpu_util_pct_mean)
        assert "mean_epoch_s" not in frame.columns  # the all-epochs speed is whole_run_epoch_s


def test_table_2_and_the_energy_figure_agree(real_fixtures: Path, tmp_path: Path) -> None:
    """Table 2's energy per epoch is the mean of the energy figure's steady-epoch bars, run by run."""
    runs = _runs(real_fixtures)
    loaded, _ = collect_runs([runs[PYTORCH], runs[JAX]])
    _, outputs = write_report(loaded, tmp_path / "report", formats=("png",))
    table2 = next(o for o in outputs if o.title.startswith("Table 2"))
    for row in table2.rows:
        bars = epoch_energy(RunFolder(runs[row.run_ids[-4:]]))
        steady = [b.energy_j for b in bars if b.epoch > row.warmup_epochs]
        assert row.energy_j_per_epoch == pytest.approx(float(np.mean(steady)), rel=1e-6)
        assert row.gpu_util_pct_mean == pytest.approx(
            summarise(RunFolder(runs[row.run_ids[-4:]])).steady.gpu_util_pct_mean
        )
