"""Noise before ranking (analyzers.figures.noise): repeats 2x apart are flagged and order nothing, contended runs are
not ordered, a share of the epoch is never printed outside [0, 100].

The repeats are the H100 fixture 7ff0 (PyTorch VGG16 b100) and a copy of it whose steady epochs took twice
as long (its run id changed): two runs of one spec, 2x apart, as two PyTorch repeats on a busy machine were
(4.2 and 10.7 images/s)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from analyzers.comparison.pairs import DataPair
from analyzers.figures.noise import disagree, why_not_ordered
from analyzers.figures.steady import Spread
from analyzers.report import collect_runs, write_report
from tests.conftest import run_tracer
from tracer.core.schema import DATA_MODES


def _copy(src: Path, dst: Path, slower: float = 1.0) -> Path:
    """The run folder under another id; its epochs after the first `slower` times as long."""
    shutil.copytree(src, dst)
    record = json.loads((dst / "run.json").read_text())
    record["run_id"] = dst.name
    (dst / "run.json").write_text(json.dumps(record))
    events = [json.loads(line) for line in (dst / "events.jsonl").read_text().splitlines()]
    starts = {e["epoch"]: e["t_ns"] for e in events if e["kind"] == "epoch_start"}
    for e in events:
        if e["kind"] == "epoch_end" and e["epoch"] > 1:
            e["t_ns"] = starts[e["epoch"]] + int((e["t_ns"] - starts[e["epoch"]]) * slower)
    (dst / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return dst


@pytest.fixture(scope="module")
def repeats(real_fixtures: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two repeats 2x apart (the fast one first) and JAX's run of the case, in one folder of runs."""
    runs = {p.name[-4:]: p for p in (real_fixtures / "gpu-h100").iterdir() if (p / "run.json").exists()}
    out = tmp_path_factory.mktemp("noise") / "runs"
    out.mkdir()
    fast = _copy(runs["7ff0"], out / runs["7ff0"].name)
    slow = _copy(runs["7ff0"], out / (runs["7ff0"].name[:-4] + "slow"), slower=2.0)
    jax = _copy(runs["7a96"], out / runs["7a96"].name)
    return fast, slow, jax


def test_compare_says_the_repeats_disagree_and_prints_no_ratio_as_a_finding(
    repeats: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    fast, slow, jax = repeats
    table = tmp_path / "cmp.csv"
    result = run_tracer("compare", str(fast), str(slow), str(jax), "--csv", str(table))
    assert result.returncode == 0, result.stderr
    assert "A: the repeats disagree: images/s (steady)" in result.stdout
    with table.open() as f:
        rows = {r["metric"]: r for r in csv.DictReader(f)}
    assert sorted(rows["run id"]["run_a"].split()) == sorted([fast.name, slow.name])
    rate = rows["images/s (steady)"]
    assert float(rate["run_a_max"]) == pytest.approx(2 * float(rate["run_a_min"]), rel=0.01)  # 2x apart
    for metric in ("images/s (steady)", "epoch time (steady)"):
        assert rows[metric]["noise_b_over_a"] == "repeats disagree"
        line = next(ln for ln in result.stdout.splitlines() if ln.startswith(f"│ {metric} "))
        assert "within noise" in line and not any(c.endswith("x") for c in line.split("│")[-2:-1])


def test_show_and_the_report_flag_the_repeats(repeats: tuple[Path, Path, Path], tmp_path: Path) -> None:
    fast, _slow, _jax = repeats
    shown = run_tracer("show", str(fast))
    assert shown.returncode == 0, shown.stderr
    assert "the repeats disagree: images/s (steady)" in " ".join(shown.stdout.split())
    runs, _ = collect_runs([fast.parent])
    _, outputs = write_report(runs, tmp_path / "report", formats=("png",))
    (row,) = [r for r in next(o for o in outputs if o.title.startswith("Table 2")).rows if r.framework == "pytorch"]
    assert row.runs_ok == 2
    assert "repeats disagree" in (tmp_path / "report" / "table2-gpu.md").read_text()


def test_the_rules_of_noise() -> None:
    one = lambda v: Spread(v, v, v, 1)  # noqa: E731 - a single run
    assert why_not_ordered(one(24.2), one(24.1)) == "closer than 5 %"  # TensorFlow above MXNet: not ordered
    assert why_not_ordered(one(24.2), one(30.0), (True, False)) == "contended"
    assert why_not_ordered(one(24.2), one(30.0), (True, False), timed=False) == ""  # memory: load-independent
    assert why_not_ordered(Spread(10, 9, 11, 3), Spread(10.8, 10.5, 12, 3)) == "repeats overlap"
    assert why_not_ordered(Spread(7.45, 4.2, 10.7, 2), one(20)) == "repeats disagree"
    assert why_not_ordered(Spread(10, 9.8, 10.2, 3), one(20)) == ""
    assert disagree(Spread(7.45, 4.2, 10.7, 2)) and not disagree(Spread(10, 9.5, 10.5, 2))


def test_a_share_of_the_epoch_is_never_printed_outside_0_100() -> None:
    """One steady epoch per mode on a busy machine made synthetic slower than files: '-3 %' was printed."""
    files, synthetic = Spread(100.0, 100.0, 100.0, 1), Spread(97.0, 97.0, 97.0, 1)
    pair = DataPair("pytorch", "alexnet", "small", "cpu", 4, (files, None, synthetic), (("a",), (), ("c",)))
    assert pair.input_share is not None and pair.input_share < 0  # the raw ratio
    assert pair.share_text().startswith("not measurable here")
    assert "-3" not in pair.share_text() and "not measurable here" in pair.sentence()
    busy = DataPair("pytorch", "alexnet", "small", "cpu", 4, (files, None, Spread(300.0, 300.0, 300.0, 1)),
                    (("a",), (), ("c",)), (True, False, False))  # fmt: skip
    assert busy.share_text() == "not measurable here (files and synthetic throughputs within noise: contended)"
    quiet = DataPair("pytorch", "alexnet", "small", "cpu", 4, (files, None, Spread(300.0, 300.0, 300.0, 1)),
                     (("a",), (), ("c",)), tuple(False for _ in DATA_MODES))  # fmt: skip
    assert quiet.share_text() == "67 %"
