"""`tracer compare`: ratios B / A against values computed from the two run folders directly."""

from __future__ import annotations

import csv
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from analyzers.comparison.compare import compare
from tests.analyzers.report import _expected as x
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder


@pytest.fixture(scope="module")
def second_run(make_run: Callable[..., RunFolder]) -> RunFolder:
    return make_run("pytorch", "--batch", "4", "--limit", "8", "--epochs", "1")


def _threads_max(run: Path) -> float:
    return max(x.process_column(run, "threads"))


def test_ratios_equal_values_from_the_folders(
    tiny_pytorch_run: RunFolder, second_run: RunFolder, tmp_path: Path
) -> None:
    a, b = tiny_pytorch_run.path, second_run.path
    out = tmp_path / "cmp.csv"
    result = run_tracer("compare", str(a), str(b), "--csv", str(out))
    assert result.returncode == 0, result.stderr
    assert a.name in result.stdout and b.name in result.stdout
    with out.open() as f:
        rows = {r["metric"]: r for r in csv.DictReader(f)}
    assert (rows["run id"]["run_a"], rows["run id"]["run_b"]) == (a.name, b.name)
    cpu_a, cpu_b = x.process_column(a, "cpu_pct"), x.process_column(b, "cpu_pct")
    steady_a, steady_b = x.steady_process_column(a, "cpu_pct"), x.steady_process_column(b, "cpu_pct")
    expected = {
        "images/s (steady)": (x.steady_images_per_s(a), x.steady_images_per_s(b)),
        "epoch time (steady)": (x.steady_epoch_s(a), x.steady_epoch_s(b)),
        "first epoch": (x.first_epoch_s(a), x.first_epoch_s(b)),
        "CPU % mean (100 = all cores) (steady)": (sum(steady_a) / len(steady_a), sum(steady_b) / len(steady_b)),
        "epoch time (whole run)": (x.mean_epoch_s(a), x.mean_epoch_s(b)),
        "images/s (whole run)": (x.images_per_s(a), x.images_per_s(b)),
        "CPU % mean (100 = all cores) (whole run)": (sum(cpu_a) / len(cpu_a), sum(cpu_b) / len(cpu_b)),
        "peak RSS summed over processes (whole run)": (
            max(x.process_column(a, "rss_mib")),
            max(x.process_column(b, "rss_mib")),
        ),
        "threads max (whole run)": (_threads_max(a), _threads_max(b)),
    }
    for metric, (va, vb) in expected.items():
        row = rows[metric]
        assert float(row["run_a"]) == pytest.approx(va, rel=1e-12), metric
        assert float(row["run_b"]) == pytest.approx(vb, rel=1e-12), metric
        assert float(row["ratio_b_over_a"]) == pytest.approx(vb / va, rel=1e-12), metric
        assert row["run_a_min"] == row["run_a_max"] == row["run_a"], metric  # one run: no spread
    assert rows["GPU utilisation mean (steady)"]["ratio_b_over_a"] == ""  # no GPU here: no ratio, not a zero
    ratio = vb / va  # the last one printed, as the console shows it
    assert f"{ratio:.2f}x" in result.stdout


def _matched(totals: dict[str, int]) -> dict[str, int]:
    """Totals keyed as compare matches them: a trailing `_vNNNN`/`_vNNNNN` version dropped."""
    out: dict[str, int] = {}
    for name, ns in totals.items():
        key = re.sub(r"_v\d{4,6}$", "", name)
        out[key] = out.get(key, 0) + ns
    return out


def test_cuda_api_differences_from_imported_traces(tmp_path: Path, real_fixtures: Path) -> None:
    """An nsys report beside a Kineto trace: two tracers that record different calls (Kineto no driver
    call), so the API rows cover the calls both recorded, and a note names the rest."""
    out = tmp_path / "runs"
    for rel in ("nsys-h100/resnet18_train_nsys2025.3.1.sqlite", "kineto-h100/resnet50_bs100_train_torch2.11.json.gz"):
        assert run_tracer("import", str(real_fixtures / rel), "--out", str(out)).returncode == 0
    a, b = sorted(out.iterdir())
    ta, tb = _matched(x.cuda_totals_ns(a)), _matched(x.cuda_totals_ns(b))
    both = set(ta) & set(tb)
    assert set(ta) - both and both  # nsys holds calls Kineto has not (driver calls): the case in question
    result = compare([[RunFolder(a)], [RunFolder(b)]])
    diffs = {d.metric: d for d in result.differences}
    total = diffs["CUDA API total time, calls every tracer recorded (whole run)"]
    sum_a, sum_b = (sum(t[n] for n in both) for t in (ta, tb))
    assert total.a == pytest.approx(sum_a / 1e6) and total.b == pytest.approx(sum_b / 1e6)
    assert total.ratio(1) == pytest.approx(sum_b / sum_a)
    biggest = max(both, key=lambda n: abs(tb[n] - ta[n]))
    top = diffs[f"CUDA {biggest} time (whole run)"]
    assert (top.a, top.b) == pytest.approx((ta[biggest] / 1e6, tb[biggest] / 1e6))
    calls = [m for m in diffs if m.startswith("CUDA ") and "API total" not in m]
    assert len(calls) == min(5, len(both)) and all(
        m.removeprefix("CUDA ").removesuffix(" time (whole run)") in both for m in calls
    )
    (note,) = [n for n in result.api_notes if "only nsys recorded" in n]
    assert min(set(ta) - both) in note  # named, not counted as no time
    # one function under two spellings (nsys keeps `_v11060`, Kineto does not) is matched as one
    assert not any(re.search(r"_v\d{4,6} time", m) for m in diffs)
    launch = diffs.get("CUDA cudaLaunchKernelExC time (whole run)")
    if launch is not None:
        assert launch.a and launch.b  # present in both traces, not paired with nothing


@pytest.mark.parametrize("which", ["missing", "damaged"])
def test_bad_input_is_one_line_and_exit_2(tiny_pytorch_run: RunFolder, tmp_path: Path, which: str) -> None:
    bad = tmp_path / "bad"
    if which == "damaged":
        shutil.copytree(tiny_pytorch_run.path, bad)
        (bad / "run.json").write_text("{not json")
    result = run_tracer("compare", str(tiny_pytorch_run.path), str(bad), "--runs", str(tmp_path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracer: error:"), result.stderr


def test_three_runs_and_a_group_of_repeats(tiny_pytorch_run: RunFolder, second_run: RunFolder, tmp_path: Path) -> None:
    """Three arguments, two of them repeats of one spec (a copy stands for a repeat): two columns, the
    repeats pooled as median with range; `--no-group` gives three columns and two ratios."""
    a, b = tiny_pytorch_run.path, second_run.path
    repeat = tmp_path / (a.name + "-repeat")
    shutil.copytree(a, repeat)
    (repeat / "run.json").write_text((a / "run.json").read_text().replace(a.name, repeat.name))
    out = tmp_path / "cmp.csv"
    grouped = run_tracer("compare", str(a), str(b), str(repeat), "--csv", str(out))
    assert grouped.returncode == 0, grouped.stderr
    with out.open() as f:
        rows = {r["metric"]: r for r in csv.DictReader(f)}
    assert rows["run id"]["run_a"].split() == sorted([a.name, repeat.name])
    assert "run_c" not in rows["run id"]
    row = rows["images/s (steady)"]
    assert float(row["run_a"]) == pytest.approx(x.steady_images_per_s(a), rel=1e-12)  # median of two equal runs
    ungrouped = run_tracer("compare", str(a), str(b), str(repeat), "--no-group", "--csv", str(out))
    assert ungrouped.returncode == 0, ungrouped.stderr
    with out.open() as f:
        rows = {r["metric"]: r for r in csv.DictReader(f)}
    assert rows["run id"]["run_c"] == repeat.name
    assert float(rows["images/s (steady)"]["ratio_c_over_a"]) == pytest.approx(1.0, rel=1e-12)
    assert "C / A" in ungrouped.stdout


def test_one_run_is_not_a_comparison(tiny_pytorch_run: RunFolder) -> None:
    result = run_tracer("compare", str(tiny_pytorch_run.path))
    assert result.returncode == 2 and "two runs or groups at least" in result.stderr


def test_a_diverged_run_stays_out_of_a_groups_speed_median(real_fixtures: Path) -> None:
    """H100 fixtures: 3950 diverged; pooled beside a032, the group's steady images/s is a032's alone and the
    data-wait share beside it is the steady one."""
    from analyzers.figures.run_summary import summarise

    runs = {p.name[-4:]: RunFolder(p) for p in (real_fixtures / "gpu-h100").iterdir() if (p / "run.json").exists()}
    result = compare([[runs["3950"], runs["a032"]], [runs["6573"]]])
    a = result.columns[0]
    assert [s.run_id[-4:] for s in a.left_out] == ["3950"]
    rows = {d.metric: d for d in result.differences}
    rate = rows["images/s (steady)"].values[0]
    assert rate is not None and rate.n == 1
    assert rate.median == summarise(runs["a032"]).steady_images_per_s
    wait = rows["data-wait share of step time (steady)"].values[1]
    assert wait is not None and wait.median == summarise(runs["6573"]).steady_data_wait_pct
    assert rows["CPU % mean (100 = all cores) (steady)"].values[0].n == 2  # not a speed: every run counts


def test_an_nsys_run_beside_a_cupti_run_is_compared_on_the_calls_both_recorded(real_fixtures: Path) -> None:
    """One workload on one H100, traced by nsys and by CUPTI (tests/data/fixtures/gpu-h100): the nsys report
    holds no cudaFuncGetAttributes (CUPTI: 186 ms of it), CUPTI here no cudaEventCreate. Neither is a call
    that took no time: both are left out of the rows and named."""
    nsys, cupti = (RunFolder(next((real_fixtures / "gpu-h100").glob(f"*-{s}"))) for s in ("cf98", "a266"))
    result = compare([[nsys], [cupti]])
    rows = {d.metric: d for d in result.differences if d.metric.startswith("CUDA ")}
    assert not any("cudaFuncGetAttributes" in m or "cudaEventCreate" in m for m in rows)
    totals = [_matched(x.cuda_totals_ns(f.path)) for f in (nsys, cupti)]
    both = set(totals[0]) & set(totals[1])
    total = rows["CUDA API total time, calls every tracer recorded (whole run)"]
    assert (total.a, total.b) == pytest.approx(tuple(sum(t[n] for n in both) / 1e6 for t in totals))
    only_nsys, only_cupti = (next(n for n in result.api_notes if f"only {s} recorded" in n) for s in ("nsys", "cupti"))
    assert "cudaEventCreate" in only_nsys and "cudaFuncGetAttributes" in only_cupti
