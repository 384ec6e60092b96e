"""The probe's recorder on the ways training loops consume a pipeline, in this process: a plain `for`,
a loop that reads one batch ahead (accelerate, under transformers' Trainer), one that stops at the
pipeline's length without asking past it and keeps the iterator (Lightning), one that takes the batches of a
gradient accumulation before training them, an evaluation before the
first epoch (Lightning's sanity check), an evaluation inside the first step, and a `break`. Each must
give every trained batch as a step, one epoch per pass, ending where its last step ended.

The same consumers run for real in test_examples.py (Lightning and transformers' Trainer); these pin
the rules one at a time."""

from __future__ import annotations

import csv
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracer.probe.passes import Pass
from tracer.probe.recorder import Recorder
from tracer.worker.schema import EVENTS_FILE, PARTIAL, PROBE_STEPS_SEPARATOR, SAMPLES_DIR, STEPS_TABLE, Event

BATCH = 4
PROBE = "torch.DataLoader"


class Batch:
    shape = (BATCH,)


class Pipeline:
    """A sized pipeline whose iteration is a Pass requiring training, as the torch DataLoader's hook makes."""

    def __init__(self, recorder: Recorder, batches: int) -> None:
        self.recorder, self.batches = recorder, [Batch() for _ in range(batches)]

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Pass:
        return Pass(self.recorder, PROBE, True, self).attach(iter(self.batches))


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[Recorder]:
    (tmp_path / SAMPLES_DIR).mkdir()
    rec = Recorder(str(tmp_path))
    yield rec
    rec.close()


def train(rec: Recorder, seconds: float = 0.002) -> None:
    """A step's work: backward and the optimizer step, each a training mark."""
    time.sleep(seconds)
    rec.mark_training()
    rec.mark_training()


def finished(rec: Recorder) -> tuple[list[dict[str, str]], list[dict[str, object]]]:
    """The steps rows and the epoch_end events, once the recorder has written them."""
    rec.close()
    path = Path(rec.run_dir) / SAMPLES_DIR / f"{STEPS_TABLE}{PROBE_STEPS_SEPARATOR}{os.getpid()}.csv"
    rows = list(csv.DictReader(path.open())) if path.exists() else []
    events = [json.loads(line) for line in (Path(rec.run_dir) / EVENTS_FILE).read_text().splitlines()]
    return rows, [e for e in events if e["kind"] == Event.EPOCH_END]


def images_per_epoch(rows: list[dict[str, str]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for r in rows:
        out[int(r["epoch"])] = out.get(int(r["epoch"]), 0) + int(r["images"])
    return out


def test_a_plain_loop_gives_one_step_per_batch(recorder: Recorder) -> None:
    data = Pipeline(recorder, 5)
    for _epoch in range(2):
        for _batch in data:
            train(recorder)
    rows, ends = finished(recorder)
    assert [int(r["step"]) for r in rows] == [0, 1, 2, 3, 4] * 2
    assert images_per_epoch(rows) == {1: 5 * BATCH, 2: 5 * BATCH}
    assert [e["steps"] for e in ends] == [5, 5]


def read_ahead(batches: Iterator[Batch]) -> Iterator[Batch]:
    """accelerate's DataLoaderShard: the next batch is read before the current one is handed on."""
    current = next(batches)
    while True:
        try:
            following = next(batches)
        except StopIteration:
            yield current
            break
        yield current
        current = following


def test_a_loop_that_reads_one_batch_ahead_counts_every_trained_batch(recorder: Recorder) -> None:
    data = Pipeline(recorder, 6)
    for _epoch in range(2):
        for _batch in read_ahead(iter(data)):
            train(recorder)
    rows, ends = finished(recorder)
    assert images_per_epoch(rows) == {1: 6 * BATCH, 2: 6 * BATCH}
    assert [e["images"] for e in ends] == [6 * BATCH, 6 * BATCH]
    assert int(rows[0]["images"]) == 2 * BATCH  # the batch read ahead is carried into the first step


def gathered(batches: Iterator[Batch], k: int) -> Iterator[list[Batch]]:
    """transformers' Trainer under gradient accumulation: k batches taken first, then trained."""
    group: list[Batch] = []
    for batch in batches:
        group.append(batch)
        if len(group) == k:
            yield group
            group = []
    if group:
        yield group


def test_batches_gathered_for_gradient_accumulation_are_one_step_each_update(recorder: Recorder) -> None:
    data = Pipeline(recorder, 8)
    for _epoch in range(2):
        for group in gathered(iter(data), 4):
            for _batch in group:
                time.sleep(0.001)
                recorder.mark_training()  # backward
            recorder.mark_training()  # the optimizer step
    rows, ends = finished(recorder)
    assert [int(r["images"]) for r in rows] == [4 * BATCH] * 4  # two updates of four batches an epoch
    assert [e["images"] for e in ends] == [8 * BATCH, 8 * BATCH]


def test_a_loop_that_stops_at_the_length_and_keeps_its_iterator_gives_each_epoch(recorder: Recorder) -> None:
    """Lightning: `len(loader)` batches taken, the iterator kept until the next epoch's replaces it."""
    data = Pipeline(recorder, 4)
    held: list[Pass] = []
    for _epoch in range(3):
        held[:] = [iter(data)]  # the new pass is made while the old one is still held
        for _ in range(len(data)):
            next(held[0])
            train(recorder)
        time.sleep(0.2)  # the loop's epoch end (logging, checkpoints): not the epoch's
    done_ns = time.time_ns()
    rows, ends = finished(recorder)
    assert images_per_epoch(rows) == {1: 4 * BATCH, 2: 4 * BATCH, 3: 4 * BATCH}
    last_step_end = {
        int(r["epoch"]): int(r["start_ns"]) + 1e9 * (float(r["data_wait_s"]) + float(r["compute_s"])) for r in rows
    }
    for e in ends:  # each epoch ends where its last step's training did, not where the next began
        assert abs(e["t_ns"] - last_step_end[e["epoch"]]) < 1e6
    assert done_ns - ends[-1]["t_ns"] > 0.15e9


def test_an_evaluation_before_the_first_epoch_is_not_one_and_does_not_hide_it(recorder: Recorder) -> None:
    """Lightning's sanity check: two validation batches taken, the iterator kept, then training."""
    val, data = Pipeline(recorder, 8), Pipeline(recorder, 3)
    sanity = iter(val)
    next(sanity), next(sanity)
    for _epoch in range(2):
        for _batch in data:
            train(recorder)
        for _batch in val:  # validation after each epoch
            pass
    del sanity
    rows, ends = finished(recorder)
    assert images_per_epoch(rows) == {1: 3 * BATCH, 2: 3 * BATCH}
    assert len(ends) == 2


def test_an_evaluation_inside_the_first_step_resumes_the_epoch(recorder: Recorder) -> None:
    val, data = Pipeline(recorder, 2), Pipeline(recorder, 3)
    for i, _batch in enumerate(data):
        if i == 0:
            for _ in val:  # an evaluation before the first backward
                pass
        train(recorder)
    rows, ends = finished(recorder)
    assert images_per_epoch(rows) == {1: 3 * BATCH}
    assert [e["steps"] for e in ends] == [3]


def test_a_loop_left_with_break_keeps_its_last_trained_step(recorder: Recorder) -> None:
    data = Pipeline(recorder, 10)
    for i, _batch in enumerate(data):
        train(recorder)
        if i == 2:
            break
    rows, ends = finished(recorder)
    assert images_per_epoch(rows) == {1: 3 * BATCH}
    assert [e["steps"] for e in ends] == [3]


def test_a_batch_taken_but_not_trained_before_a_break_is_left_out(recorder: Recorder) -> None:
    data = Pipeline(recorder, 10)
    for i, _batch in enumerate(data):
        if i == 2:
            break
        train(recorder)
    rows, _ = finished(recorder)
    assert images_per_epoch(rows) == {1: 2 * BATCH}


def test_epochs_left_early_on_purpose_are_complete(recorder: Recorder) -> None:
    data = Pipeline(recorder, 6)
    for _epoch in range(3):  # every epoch stops after 2 of its 6 batches: the loop's own limit
        for i, _batch in enumerate(data):
            train(recorder)
            if i == 1:
                break
    _, ends = finished(recorder)
    assert [e["steps"] for e in ends] == [2, 2, 2] and not any(e.get(PARTIAL) for e in ends)


def test_a_last_epoch_shorter_than_the_one_before_is_partial(recorder: Recorder) -> None:
    data = Pipeline(recorder, 4)
    for epoch in range(3):
        for i, _batch in enumerate(data):
            train(recorder)
            if epoch == 2 and i == 0:
                break  # the run ends here, one step into its third epoch
    _, ends = finished(recorder)
    assert [(e["epoch"], e["steps"], e.get(PARTIAL, False)) for e in ends] == [
        (1, 4, False),
        (2, 4, False),
        (3, 1, True),
    ]
