"""Learning beside speed on the H100 fixtures (issue 24 item 10): the chance-level verdict, and compare's
per-epoch loss and accuracy with its flag for curves that part beyond run-to-run noise."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from analyzers.comparison.compare import compare
from analyzers.diagnosis import diagnose
from analyzers.figures.learning import CHANCE_LOSS_PCT, at_chance, chance_loss
from tests.conftest import run_tracer
from tracer.core.runfolder import RunFolder

H100 = "gpu-h100"
CHANCE = {"85cf": "fired", "7ff0": "fired", "a504": "fired", "7a96": "fired", "f7d9": "quiet", "a032": "quiet"}


def _fixture(shared: Path, suffix: str) -> RunFolder:
    (path,) = (shared / H100).glob(f"*-{suffix}")
    return RunFolder(path)


@pytest.mark.parametrize("suffix", sorted(CHANCE))
def test_chance_level_fires_on_the_batch_100_runs_that_end_near_ln_3(real_fixtures: Path, suffix: str) -> None:
    folder = _fixture(real_fixtures, suffix)
    (verdict,) = [v for v in diagnose(folder) if v.rule == "chance-level"]
    assert verdict.state == CHANCE[suffix], verdict
    last = folder.epochs()[-1].loss
    assert verdict.value == pytest.approx(100 * abs(last - math.log(3)) / math.log(3))
    assert (verdict.value <= CHANCE_LOSS_PCT) == (CHANCE[suffix] == "fired")


def test_chance_level_is_not_judged_on_a_diverged_loss(real_fixtures: Path) -> None:
    (verdict,) = [v for v in diagnose(_fixture(real_fixtures, "3950")) if v.rule == "chance-level"]
    assert verdict.state == "not measured" and "diverged" in verdict.finding


def test_chance_is_ln_classes() -> None:
    assert chance_loss(3) == pytest.approx(1.0986, abs=1e-4)
    assert at_chance(1.0993603, 3) and not at_chance(0.86, 3) and not at_chance(float("nan"), 3)


def test_compare_shows_loss_accuracy_and_both_memory_figures(real_fixtures: Path) -> None:
    a, b = _fixture(real_fixtures, "85cf"), _fixture(real_fixtures, "a504")
    result = compare([[a], [b]])
    rows = {d.metric: d for d in result.differences}
    for i, (ea, eb) in enumerate(zip(a.epochs(), b.epochs()), start=1):
        loss = rows[f"training loss, epoch {i}"]
        assert loss.values[0] is not None and loss.values[0].median == ea.loss
        assert loss.values[1] is not None and loss.values[1].median == eb.loss
        assert f"training accuracy, epoch {i}" in rows  # recorded by today's workers; absent in these folders
    nvml = rows["GPU memory peak, NVML (what the process holds) (steady)"]
    assert nvml.values[1] is not None and nvml.values[1].median == 61450  # XLA's preallocation, as NVML saw it
    assert "GPU memory peak, the framework's own (in use) (steady)" in rows
    assert result.learning_gaps == ()  # both stay at ln 3 alike: no difference in learning


def test_compare_flags_curves_that_part(real_fixtures: Path, tmp_path: Path) -> None:
    a = _fixture(real_fixtures, "85cf")
    copy = tmp_path / a.path.name.replace("85cf", "0000")
    shutil.copytree(a.path, copy)
    events = [json.loads(line) for line in (copy / "events.jsonl").read_text().splitlines()]
    for e in events:
        if e["kind"] == "epoch_end" and e["epoch"] > 1:
            e["loss"] = 0.5  # a copy that learns, where the original stays at chance
    (copy / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    result = compare([[a], [RunFolder(copy)]])
    ((letter, gaps),) = result.learning_gaps
    assert letter == "B" and [(g.metric, g.epoch) for g in gaps] == [("loss", 2), ("loss", 3)]
    printed = run_tracer("compare", str(a.path), str(copy))
    assert "learning differs: A (pytorch) and B (pytorch)" in printed.stdout, printed.stderr
    assert "loss at epoch 2: 1.098 (A) vs 0.5 (B)" in printed.stdout
