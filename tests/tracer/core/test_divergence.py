"""Issue 24 item 1: a NaN or infinite loss ends a run as `diverged`, in new runs and in old folders."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import get_args

import pytest

from tests.conftest import assert_strict_json, run_tracer
from tracer.core.divergence import divergence
from tracer.core.options import spec_fields
from tracer.core.records import RunStatus
from tracer.core.runfolder import RunFolder, write_json_atomic
from tracer.core.schema import NONFINITE, ON_DIVERGENCE, Event, strict_json

NAN_RUN = "gpu-h100/20261125-000310-pytorch-alexnet-big-gpu-b1-3950"  # NaN in epoch 2, run.json says ok


@pytest.fixture(scope="module")
def lr10_run(make_run: Callable[..., RunFolder]) -> RunFolder:
    """The largest learning rate the option allows: AlexNet's loss is NaN within a few steps."""
    return make_run("pytorch", "--lr", "10", "--epochs", "1", "--limit", "8", expect_ok=False)


def test_lr_10_ends_diverged_in_its_first_epoch_with_every_step_kept(lr10_run: RunFolder) -> None:
    record = lr10_run.read_record()
    assert record.outcome.status is RunStatus.DIVERGED, record.outcome
    found = record.outcome.divergence
    assert found is not None and found.epoch == 1 and found.loss in ("nan", "inf")
    assert found.step is not None and found.step < 7  # stopped inside epoch 1, not at its end
    assert found.lr == 10.0 and not found.continued
    assert found.last_finite_loss is None or math.isfinite(found.last_finite_loss)
    assert record.outcome.exit_code == 5
    assert not record.rankable and "diverged" in record.not_rankable_why
    assert lr10_run.epochs() == []  # the cut epoch is no epoch time
    steps = lr10_run.samples("steps")
    assert steps is not None and steps.num_rows == found.step + 1  # every step up to the divergence


def test_every_json_file_of_a_diverged_run_is_strict(lr10_run: RunFolder) -> None:
    assert assert_strict_json(lr10_run.path) >= 3  # run.json, worker_config.json, events.jsonl
    progress = [json.loads(line) for line in lr10_run.events_path.read_text().splitlines()]
    (diverged,) = [e for e in progress if e["kind"] == Event.DIVERGED]
    assert diverged["loss"] in ("nan", "inf")  # named, not written as a bare NaN
    # an event that held a non-finite number (a progress or epoch_end read after the NaN, if the run got that
    # far before it stopped: on an idle machine it may not) writes null and records the fact
    nonfinite = [e for e in progress if e.get(NONFINITE)]
    assert all(e["loss"] is None and e[NONFINITE]["loss"] in ("nan", "inf") for e in nonfinite)


def test_show_runs_and_diagnose_mark_it(lr10_run: RunFolder) -> None:
    runs = run_tracer("runs", "--runs", str(lr10_run.path.parent))
    assert "diverged" in runs.stdout
    show = run_tracer("show", str(lr10_run.path))
    assert show.returncode == 0 and "diverged" in show.stdout and "lr 10" in show.stdout
    diagnose = run_tracer("diagnose", str(lr10_run.path), "--format", "json")
    (crash,) = [v for v in json.loads(diagnose.stdout)["verdicts"] if v["rule"] == "crash"]
    assert crash["fired"] and "loss nan" in crash["finding"] and "ended ok" not in crash["finding"]


def test_continue_keeps_training_and_still_marks_the_run(make_run: Callable[..., RunFolder]) -> None:
    folder = make_run(
        "pytorch", "--lr", "10", "--epochs", "1", "--limit", "8", "--on-divergence", "continue", expect_ok=False
    )
    record = folder.read_record()
    assert record.outcome.status is RunStatus.DIVERGED and record.outcome.exit_code == 0
    assert record.outcome.divergence is not None and record.outcome.divergence.continued
    (epoch,) = folder.epochs()
    assert epoch.images == 8 and not math.isfinite(epoch.loss)  # trained to the end, the loss kept as NaN
    assert_strict_json(folder.path)


def test_an_old_folder_with_a_nan_loss_is_read_as_diverged(real_fixtures: Path, tmp_path: Path) -> None:
    folder = RunFolder(real_fixtures / NAN_RUN)
    assert json.loads(folder.run_json.read_text())["outcome"]["status"] == "ok"  # as it was written
    record = folder.read_record()
    assert record.outcome.status is RunStatus.DIVERGED and not record.rankable
    found = record.outcome.divergence
    assert found is not None and found.epoch == 2 and found.loss == "nan" and found.lr == 0.001
    assert found.last_finite_loss is not None and math.isfinite(found.last_finite_loss)
    assert [math.isfinite(e.loss) for e in folder.epochs()] == [True, False]
    copy = tmp_path / "copy"
    shutil.copytree(folder.path, copy)
    RunFolder(copy).write_record(record)  # written back: strict, and still diverged
    assert assert_strict_json(copy / "run.json") == 1
    assert RunFolder(copy).read_record().outcome == record.outcome


def test_a_healthy_fixture_stays_ok(real_fixtures: Path) -> None:
    record = RunFolder(real_fixtures / "gpu-h100/20261125-000159-pytorch-alexnet-big-gpu-b100-85cf").read_record()
    assert record.outcome.status is RunStatus.OK and record.rankable and record.not_rankable_why == ""


def test_the_first_nonfinite_loss_of_old_events_is_found() -> None:
    events = [
        {"kind": "progress", "epoch": 1, "images": 4, "loss": 1.5},
        {"kind": "progress", "epoch": 1, "images": 8, "loss": None, NONFINITE: {"loss": "inf"}},
        {"kind": "epoch_end", "epoch": 1, "images": 8, "loss": float("nan")},
    ]
    found = divergence(events, 0.1)
    assert found is not None and (found.epoch, found.loss, found.last_finite_loss, found.images) == (1, "inf", 1.5, 8)
    assert divergence(events[:1]) is None


def test_strict_json_names_what_it_replaced(tmp_path: Path) -> None:
    clean = strict_json({"loss": float("nan"), "epochs": [{"loss": 1.0}, {"loss": float("-inf")}]})
    assert clean == {
        "loss": None,
        "epochs": [{"loss": 1.0}, {"loss": None}],
        NONFINITE: {"loss": "nan", "epochs.1.loss": "-inf"},
    }
    write_json_atomic(tmp_path / "x.json", {"v": float("inf")})
    assert assert_strict_json(tmp_path) == 1


def test_the_option_offers_what_the_worker_knows() -> None:
    hint = spec_fields()["on_divergence"][0]
    assert get_args(get_args(hint)[0]) == ON_DIVERGENCE
